"""`awf run --dry-run` shows how a conversation is set up before anything runs: who
answers the agent (the person, a simulated user, another agent and its provider, scripted
replies), `until` and `max_turns`, the step's tools and which of them ask first, and the
run's `limits`."""

from __future__ import annotations

import textwrap

from awf_nb.engine.partner import SimulatedUser
from awf_nb.engine.plan import describe_plan
from awf_nb.workflow.loader import load_text

WORKFLOW = """
name: haiku
limits: {max_agent_turns: 40, max_tokens: 200000, timeout: 30m}
inputs: [{name: topic, default: rain}]
states:
  initial: draft
  draft:
    type: agent
    provider: local
    mode: conversation
    system_prompt: You write haiku.
    prompt: "A haiku about {{.inputs.topic}}"
    tools:
      builtin: [Read, Bash]
      commands: [{name: count, description: Count words, command: wc -w}]
      mcp: [{name: notes, command: python, args: [-m, notes_server]}]
      confirm: [Bash, notes]
      max_rounds: 5
    conversation:
      with:
        name: reviewer
        provider: "{{.inputs.topic}}-reviewer"
        system_prompt: You review haiku about {{.inputs.topic}}.
        prompt: "Review: {{.reply}}"
      until: 'message == "APPROVED"'
      max_turns: 6
    on_success: edit
  edit:
    type: agent
    provider: scripted
    mode: conversation
    prompt: tidy it
    conversation:
      with: {name: editor, replies: ["shorter", "warmer"]}
      max_turns: 3
    on_success: chat
  chat:
    type: agent
    provider: local
    mode: conversation
    prompt: "Anything else?"
    on_success: done
  done: {type: terminal}
"""


def plan(**kwargs: object) -> str:
    return describe_plan(load_text(textwrap.dedent(WORKFLOW)), {}, **kwargs)  # type: ignore[arg-type]


def section(text: str, step: str) -> list[str]:
    """The lines under step `step` in a plan."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if f". {step} [" in line)
    end = next((i for i in range(start + 1, len(lines)) if "[" in lines[i]), len(lines))
    return [line.strip() for line in lines[start + 1 : end]]


def test_the_run_limits_are_shown() -> None:
    assert "limits: max_agent_turns 40 · max_tokens 200000 · timeout 30 min 00 s" in plan()
    text = WORKFLOW.replace("limits: {max_agent_turns: 40, max_tokens: 200000, timeout: 30m}\n", "")
    shown = describe_plan(load_text(textwrap.dedent(text)), {})
    assert "limits: none (nothing bounds the agents' turns, tokens or time)" in shown
    kept = text.replace("name:", "limits: {output_bytes_kept: 65536}\nname:", 1)
    shown = describe_plan(load_text(textwrap.dedent(kept)), {})
    assert (
        "limits: none (nothing bounds the agents' turns, tokens or time) · output_bytes_kept"
        in shown
    )
    visits = text.replace("name:", "limits: {max_visits: {edit: 3}}\nname:", 1)
    shown = describe_plan(load_text(textwrap.dedent(visits)), {})
    assert "limits: max_visits edit 3" in shown and "limits: none" not in shown


def test_an_exchange_between_agents_shows_the_partner_until_max_turns_and_tools() -> None:
    assert section(plan(), "draft") == [
        "provider: local (conversation)",
        "system: You write haiku.",
        "prompt: A haiku about rain",
        "with: reviewer, provider rain-reviewer",
        "system: You review haiku about rain.",
        "prompt: Review: {{.reply}}",
        'until: message == "APPROVED"',
        "max_turns: 6",
        "tools: Read, Bash, count, notes_* (MCP server: python -m notes_server)",
        "confirm: Bash, notes (asked before each call)",
        "max_rounds: 5",
        "success -> edit",
    ]


def test_scripted_replies_and_the_person_are_shown_as_who_answers() -> None:
    text = plan()
    assert section(text, "edit")[2:4] == ["with: editor, 2 scripted replies", "max_turns: 3"]
    assert section(text, "chat")[2] == (
        "with: you (the person), until you end it (an empty line, exit, quit)"
    )


def test_a_command_partner_is_shown_with_its_command() -> None:
    text = WORKFLOW.replace(
        'with: {name: editor, replies: ["shorter", "warmer"]}',
        'with: {name: judge, command: "python3 judge.py {{.inputs.topic}}", timeout: 30s}',
    )
    edit = section(describe_plan(load_text(textwrap.dedent(text)), {}), "edit")
    assert edit[2:5] == [
        "with: judge, command: python3 judge.py {{.inputs.topic}}",
        "timeout: 30.0 s per answer",
        "max_turns: 3",
    ]


def test_a_simulated_user_replaces_the_person_in_the_plan() -> None:
    user = SimulatedUser(persona="A baker\nin a hurry.", provider="scripted", max_turns=4)
    chat = section(plan(user=user), "chat")
    assert chat[2:4] == [
        "with: user (simulated), provider scripted (playing you: A baker in a hurry.)",
        "max_turns: 4",
    ]
    # An exchange between agents keeps its partner.
    assert section(plan(user=user), "draft")[3] == "with: reviewer, provider rain-reviewer"
