"""Conversations between agents (`conversation.with`): partners, `until`, `max_turns`,
person takeover, agents across steps, run `limits`, simulated users — with scripted
parties, so every case is deterministic."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import pytest

from awf_nb.api import SimulatedUser
from awf_nb.engine.events import PERSON, TurnStarted, UserMessage
from awf_nb.engine.ports import Final, Message, TurnRequest
from awf_nb.errors import DefinitionError
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.runs import Resume, prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect, Recording
from tests.support.waiting import until

WRITER_REVIEWER = """
name: haiku
inputs: [{name: topic, default: rain}]
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    system_prompt: You write haiku.
    prompt: "A haiku about {{.inputs.topic}}"
    options: {replies: ["draft one", "draft two", "draft three", "draft four"]}
    conversation:
      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: REVIEWS}
      until: UNTIL
      max_turns: MAX
    on_success: done
  done: {type: terminal, message: "{{.states.draft.Output}}"}
"""


def writer_reviewer(
    reviews: str = '["fix line 2", "APPROVED"]',
    until: str = "'message == \"APPROVED\"'",
    max_turns: int = 6,
) -> str:
    return (
        WRITER_REVIEWER.replace("REVIEWS", reviews)
        .replace("UNTIL", until)
        .replace("MAX", str(max_turns))
    )


def said(result: Any, step: str = "draft") -> list[tuple[str, str, str]]:
    conv = result.steps[step].conversation
    return [(t.role, t.speaker, t.content) for t in conv.turns if t.role != "system"]


# --- until, max_turns, stopped_by -----------------------------------------------------------


async def test_the_reviewer_approves_and_the_condition_stops_the_exchange(run_yaml):
    sink = Collect()
    result = await run_yaml(writer_reviewer(), sink=sink)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "condition"
    assert conv.total_turns == 2
    assert result.outputs["draft"] == "draft two"  # the agent's last reply, not the partner's
    assert said(result) == [
        ("user", "", "A haiku about rain"),
        ("assistant", "", "draft one"),
        ("user", "reviewer", "fix line 2"),
        ("assistant", "", "draft two"),
        ("user", "reviewer", "APPROVED"),
    ]
    assert conv.partner_turns == 2
    started = [(e.speaker, e.turn) for e in sink.of(TurnStarted)]
    assert started == [("", 1), ("reviewer", 1), ("", 2), ("reviewer", 2)]


async def test_max_turns_ends_the_exchange_and_the_step_succeeds(run_yaml):
    result = await run_yaml(writer_reviewer(reviews='["again", "again", "again"]', max_turns=3))
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "max_turns"
    assert conv.total_turns == 3 and conv.partner_turns == 2
    assert result.outputs["draft"] == "draft three"


@pytest.mark.parametrize(
    ("until", "turns"),
    [
        ("'reply == \"draft three\"'", 3),
        ("turn >= 2", 2),
        ("tokens > 0", 1),
        ("'message contains \"line\"'", 1),
        ("'inputs.topic == \"rain\" and turn == 4'", 4),
        ("'states.draft.Output == \"x\"'", 4),  # never true: max_turns ends it
    ],
)
async def test_until_sees_each_variable(run_yaml, until: str, turns: int):
    reviews = '["fix line 2", "more", "more", "more"]'
    result = await run_yaml(writer_reviewer(reviews=reviews, until=until, max_turns=4))
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.total_turns == turns
    assert conv.stopped_by == ("max_turns" if "Output" in until else "condition")


async def test_the_partner_has_its_own_message_list_with_roles_swapped(store, workdir):
    recording = Recording()
    runner = prepare_run(
        load_text(textwrap.dedent(writer_reviewer(max_turns=6))),
        storage=store,
        cwd=workdir,
        providers=recording,
    ).runner
    state = await runner.execute()
    assert state.status == "completed", state.error
    writer = [r for r in recording.requests if r.speaker == ""]
    reviewer = [r for r in recording.requests if r.speaker == "reviewer"]
    assert [r.prompt for r in writer] == ["A haiku about rain", "fix line 2"]
    assert writer[1].history == [
        Message("user", "A haiku about rain"),
        Message("assistant", "draft one"),
    ]
    assert writer[1].system_prompt == "You write haiku."
    assert [r.prompt for r in reviewer] == ["draft one", "draft two"]
    assert reviewer[0].system_prompt == "You review haiku."
    assert reviewer[0].history == []
    assert reviewer[1].history == [Message("user", "draft one"), Message("assistant", "fix line 2")]
    assert [r.turn_number for r in reviewer] == [1, 2]


async def test_the_partner_prompt_template_sees_the_reply(run_yaml):
    text = writer_reviewer().replace(
        "        system_prompt: You review haiku.\n",
        '        system_prompt: You review haiku.\n        prompt: "Review: {{.reply}} ({{.turn}})"\n',
    )
    recording = Recording()
    result = await run_yaml(text, providers=recording)
    assert result.ok, result.error
    reviewer = [r for r in recording.requests if r.speaker == "reviewer"]
    assert [r.prompt for r in reviewer] == ["Review: draft one (1)", "Review: draft two (2)"]


async def test_scripted_replies_answer_in_order_then_the_conversation_ends(run_yaml):
    text = writer_reviewer().replace(
        """      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: ["fix line 2", "APPROVED"]}
      until: 'message == "APPROVED"'
""",
        """      with: {name: editor, replies: ["shorter", "warmer"]}
""",
    )
    sink = Collect()
    result = await run_yaml(text, sink=sink)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "user_exit"
    assert conv.total_turns == 3
    messages = [(m.speaker, m.text) for m in sink.of(UserMessage)]
    assert messages == [("", "A haiku about rain"), ("editor", "shorter"), ("editor", "warmer")]


async def test_with_person_is_the_default_conversation(run_yaml):
    text = writer_reviewer().replace(
        """      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: ["fix line 2", "APPROVED"]}
      until: 'message == "APPROVED"'
      max_turns: 6
""",
        "      with: person\n",
    )
    result = await run_yaml(text, replies=["shorter", ""])
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "user_exit" and conv.total_turns == 2


# --- load-time rules ------------------------------------------------------------------------


def problems(text: str) -> list[str]:
    try:
        load_text(textwrap.dedent(text))
    except DefinitionError as exc:
        return [p.message for p in exc.problems]
    return []


def test_max_turns_is_required_with_a_partner():
    text = writer_reviewer().replace("      max_turns: 6\n", "")
    assert any("conversation.max_turns is required" in p for p in problems(text))


@pytest.mark.parametrize("value", [0, 1001])
def test_max_turns_is_bounded(value: int):
    found = problems(writer_reviewer(max_turns=value))
    assert any(f"between 1 and 1000, got {value}" in p for p in found)


def test_max_turns_without_a_partner_is_the_removed_field_error():
    text = writer_reviewer().replace(
        """      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: ["fix line 2", "APPROVED"]}
      until: 'message == "APPROVED"'
""",
        "",
    )
    assert problems(text) == [
        "conversation.max_turns was removed in AWF v0.7: the user drives the number of turns; "
        "`mode: single` is one turn, or use conversation.with for a conversation between agents"
    ]


def test_until_without_a_partner_is_an_error():
    text = (
        writer_reviewer()
        .replace(
            """      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        options: {replies: ["fix line 2", "APPROVED"]}
""",
            "      with: person\n",
        )
        .replace("      max_turns: 6\n", "")
    )
    found = problems(text)
    assert len(found) == 1 and found[0].startswith("conversation.until needs conversation.with")


def test_a_bad_until_condition_is_a_load_error():
    found = problems(writer_reviewer(until="'message =='"))
    assert any("invalid condition" in p for p in found)


def test_an_unknown_partner_provider_is_refused_before_the_run(store, workdir):
    text = writer_reviewer().replace(
        "        provider: scripted\n        system_prompt: You review",
        "        provider: scriptd\n        system_prompt: You review",
    )
    with pytest.raises(DefinitionError) as caught:
        prepare_run(load_text(textwrap.dedent(text)), storage=store, cwd=workdir)
    assert caught.value.problems[0].path == "states.draft.conversation.with.provider"


def test_with_needs_conversation_mode():
    text = writer_reviewer().replace("    mode: conversation\n", "")
    assert any("conversation.with needs mode: conversation" in p for p in problems(text))


# --- the person steps in --------------------------------------------------------------------


async def test_stop_during_the_exchange_lets_the_person_take_over(store, workdir):
    text = writer_reviewer(reviews='["fix line 2", "more", "more", "APPROVED"]').replace(
        '["draft one", "draft two", "draft three", "draft four"]}',
        '["draft one is a long reply", "draft two", "draft three", "draft four", "five"],'
        " delay_ms: 30}",
    )
    sink = Collect()
    reader = ScriptedReader(["make it about snow"])
    runner = prepare_run(
        load_text(textwrap.dedent(text)), reader=reader, storage=store, cwd=workdir, sink=sink
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: bool(sink.text("draft")), "the writer's first reply to stream")
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    assert state.status == "completed", state.error
    turns = [(t.role, t.speaker, t.content) for t in state.steps["draft"].conversation.turns]
    # the person's message went to the writer in the reviewer's place, recorded as theirs
    assert turns[3] == ("user", PERSON, "make it about snow")
    assert state.steps["draft"].conversation.turns[2].interrupted
    assert ("user", "reviewer", "fix line 2") in turns  # then the reviewer carried on


async def test_an_empty_line_lets_the_partner_carry_on_and_exit_ends(store, workdir):
    text = writer_reviewer(reviews='["fix line 2", "more", "more"]').replace(
        '["draft one", "draft two", "draft three", "draft four"]}',
        '["draft one is a long reply", "draft two is long", "draft three"], delay_ms: 30}',
    )
    for answer, stopped, replies in (("", "condition", None), ("exit", "user_exit", 1)):
        sink = Collect()
        runner = prepare_run(
            load_text(
                textwrap.dedent(
                    text.replace("until: 'message == \"APPROVED\"'", "until: turn >= 2")
                )
            ),
            reader=ScriptedReader([answer]),
            storage=store,
            cwd=workdir,
            sink=sink,
        ).runner
        task = asyncio.create_task(runner.execute())
        await until(lambda s=sink: bool(s.text("draft")), "the writer's first reply to stream")
        runner.interrupt()
        state = await asyncio.wait_for(task, 30)
        conv = state.steps["draft"].conversation
        assert conv.stopped_by == stopped
        if replies is not None:
            assert conv.total_turns == replies
        else:
            assert [t.speaker for t in conv.turns if t.role == "user"][1] == "reviewer"


# --- agents across steps --------------------------------------------------------------------

CYCLE = """
name: cycle
limits: {max_agent_turns: 20}
states:
  initial: write
  write:
    type: agent
    provider: scripted
    prompt: "Write the next version"
    options: {replies: ["v1", "v2", "v3"]}
    conversation: {}
    on_success: count
  count:
    type: step
    command: 'n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; echo $n'
    transitions:
      - {when: 'states.count.Output contains "3"', goto: done}
      - {goto: write}
  done: {type: terminal}
"""


async def test_reentering_an_agent_step_continues_its_session(run_yaml):
    recording = Recording()
    result = await run_yaml(CYCLE, providers=recording)
    assert result.ok, result.error
    assert [len(r.history) for r in recording.requests] == [0, 2, 4]
    assert recording.requests[2].history[-1] == Message("assistant", "v2")
    conv = result.steps["write"].conversation
    assert conv.total_turns == 3


async def test_without_a_conversation_block_each_visit_is_fresh(run_yaml):
    recording = Recording()
    text = CYCLE.replace("    conversation: {}\n", "")
    result = await run_yaml(text, providers=recording)
    assert result.ok, result.error
    assert [len(r.history) for r in recording.requests] == [0, 0, 0]


def test_validate_warns_about_an_agent_cycle_without_limits():
    wf = load_text(textwrap.dedent(CYCLE.replace("limits: {max_agent_turns: 20}\n", "")))
    assert any("agent step in a cycle" in w.message for w in wf.warnings)
    assert not load_text(textwrap.dedent(CYCLE)).warnings


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ("{max_agent_turns: 2}", "limits.max_agent_turns (2) reached"),
        ("{max_tokens: 1}", "limits.max_tokens (1) reached"),
    ],
)
async def test_each_limit_ends_the_run_naming_it(run_yaml, limits: str, message: str):
    text = CYCLE.replace("{max_agent_turns: 20}", limits)
    result = await run_yaml(text)
    assert result.status == "failed"
    assert message in result.error
    assert result.state.exit_code == 3


async def test_the_timeout_limit_ends_the_run_naming_it(run_yaml):
    text = CYCLE.replace("{max_agent_turns: 20}", "{timeout: 0.3s}").replace(
        '{replies: ["v1", "v2", "v3"]}', '{replies: ["v1 is slow to write"], delay_ms: 200}'
    )
    result = await run_yaml(text)
    assert result.status == "failed"
    assert "limits.timeout (0.3s) reached" in result.error


async def test_limits_count_partner_agents_too(run_yaml):
    text = writer_reviewer(reviews='["a", "b", "c"]', until="turn > 9", max_turns=9).replace(
        "name: haiku\n", "name: haiku\nlimits: {max_agent_turns: 3}\n"
    )
    result = await run_yaml(text)
    assert result.status == "failed"
    assert "limits.max_agent_turns (3) reached" in result.error
    # writer, reviewer, writer: 3 replies; the reviewer's second turn is refused
    assert said(result)[-2:] == [("user", "reviewer", "a"), ("assistant", "", "draft two")]


# --- simulated users ------------------------------------------------------------------------

CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: Hello
    options: {replies: ["Hi, what do you need?", "Sure.", "Done.", "More?", "Bye."]}
    on_success: done
  done: {type: terminal}
"""


async def test_a_simulated_user_ends_with_exit(run_yaml):
    user = SimulatedUser(
        persona="A baker in a hurry.",
        provider="scripted",
        options={"replies": ["A bread recipe", "exit"]},
    )
    sink = Collect()
    result = await run_yaml(CHAT, user=user, sink=sink)
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.stopped_by == "user_exit"
    # Its `exit` is recorded (it was written, and cost tokens) but never sent to the agent.
    assert [(t.speaker, t.content, t.ended) for t in conv.turns if t.role == "user"] == [
        ("", "Hello", False),
        ("user (simulated)", "A bread recipe", False),
        ("user (simulated)", "exit", True),
    ]
    assert conv.total_turns == 2
    assert ("user (simulated)", 1) in [(e.speaker, e.turn) for e in sink.of(TurnStarted)]


async def test_a_simulated_user_stops_at_max_turns(run_yaml):
    user = SimulatedUser(persona="Curious.", provider="scripted", max_turns=3)  # echoes
    result = await run_yaml(CHAT, user=user)
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.stopped_by == "max_turns" and conv.total_turns == 3


async def test_the_simulated_user_gets_its_persona_as_system_prompt(run_yaml):
    from awf_nb.engine.partner import simulated_user_prompt

    recording = Recording()
    user = SimulatedUser(persona="A baker.", provider="scripted", max_turns=2)
    result = await run_yaml(CHAT, user=user, providers=recording)
    assert result.ok, result.error
    simulated = [r for r in recording.requests if r.speaker == "user (simulated)"]
    # the persona, inside the prompt that makes the agent play the person
    assert simulated[0].system_prompt == simulated_user_prompt("A baker.")
    assert simulated[0].prompt == "Hi, what do you need?"


async def test_scripted_provider_counts_replies_per_speaker():
    provider = ScriptedProvider()
    options = {"replies": ["a", "b"]}

    async def reply(speaker: str) -> str:
        turn = TurnRequest("x", step="s", options=options, speaker=speaker)
        events = [event async for event in provider.stream(turn)]
        return next(e.text for e in events if type(e) is Final)

    assert [await reply(""), await reply("p"), await reply("")] == ["a", "a", "b"]


async def test_later_steps_read_the_partner_message_and_both_transcripts(run_yaml):
    text = (
        writer_reviewer()
        .replace(
            'done: {type: terminal, message: "{{.states.draft.Output}}"}',
            """report:
    type: step
    command: >-
      echo "{{.states.draft.Conversation.PartnerMessage}}
      {{len .states.draft.Conversation.PartnerTranscript}}
      {{(index .states.draft.Conversation.Turns 3).speaker}}"
    on_success: done
  done: {type: terminal, message: "{{.states.report.Output}}"}""",
        )
        .replace("    on_success: done\n  report:", "    on_success: report\n  report:")
    )
    result = await run_yaml(text)
    assert result.ok, result.error
    assert result.state.message.split() == ["APPROVED", "4", "reviewer"]


async def test_a_partner_failing_mid_exchange_stops_it_with_error(run_yaml):
    reviews = '["fix it", {error: "the reviewer is down"}]'
    result = await run_yaml(writer_reviewer(reviews=reviews))
    assert result.status == "failed"
    assert "the reviewer is down" in result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "error"
    assert result.steps["draft"].output == "draft two"  # the last good reply is kept


async def test_cancelling_the_run_mid_exchange_is_cancelled(store, workdir):
    text = writer_reviewer(reviews='["a", "b", "c", "d"]', until="turn > 9", max_turns=9).replace(
        '["draft one", "draft two", "draft three", "draft four"]}',
        '["draft one", "draft two", "draft three", "draft four"], delay_ms: 50}',
    )
    sink = Collect()
    runner = prepare_run(
        load_text(textwrap.dedent(text)), storage=store, cwd=workdir, sink=sink
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: len(sink.of(TurnStarted)) >= 3, "the third message to start")
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert runner.state.steps["draft"].conversation.stopped_by == "cancelled"
    saved = store.load_state(runner.run_id)
    assert saved.steps["draft"].conversation.stopped_by == "cancelled"


async def test_until_sees_the_environment(run_yaml, monkeypatch):
    monkeypatch.setenv("HAIKU_DONE_AT", "2")
    text = writer_reviewer(until="'turn == int(env.HAIKU_DONE_AT)'").replace(
        "name: haiku\n", "name: haiku\nenv: [HAIKU_DONE_AT]\n"
    )
    result = await run_yaml(text)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "condition" and conv.total_turns == 2


async def test_resume_after_the_partner_s_last_message_still_sees_it(store, workdir):
    """Killed after the reviewer's APPROVED was written but before the step ended: resume
    has the writer answer it, and `until` still sees the reviewer's last message."""
    text = textwrap.dedent(writer_reviewer())
    state = await prepare_run(load_text(text), storage=store, cwd=workdir).runner.execute()
    assert state.steps["draft"].conversation.stopped_by == "condition"
    saved = store.load_state(state.run_id)
    saved.status, saved.current_step = "failed", "draft"
    saved.steps["draft"].status = "running"
    saved.steps["draft"].conversation.stopped_by = ""
    store.save_state(saved)

    resumed = await prepare_run(Resume(state.run_id), storage=store, cwd=workdir).runner.execute()
    assert resumed.status == "completed", resumed.error
    conv = resumed.steps["draft"].conversation
    assert conv.stopped_by == "condition" and conv.total_turns == 3
    assert [t.speaker for t in conv.turns if t.role == "user"] == ["", "reviewer", "reviewer"]
