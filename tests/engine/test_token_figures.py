"""One meaning per token figure: a reply's tokens are the input plus output tokens the
provider reported for it, and every place that shows tokens — the live line, the turns in
the state and `awf status`, the step, the conversation, the summary, `RunResult`, the
notebook summary — adds up those same figures. Checked against what a real
OpenAI-compatible server (tests/support) reported for each request."""

from __future__ import annotations

import io
import re

from awf_nb.engine import events as ev
from awf_nb.engine.state import RunState
from awf_nb.frontends.notebook.summary import summary_html
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.frontends.terminal.text import describe_state
from tests.support.events import Collect
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

EXCHANGE = """
name: haiku
states:
  initial: draft
  draft:
    type: agent
    provider: openai_compatible
    mode: conversation
    system_prompt: You write haiku.
    prompt: "A haiku about rain"
    options: {{base_url: "{url}", model: writer}}
    conversation:
      with:
        name: reviewer
        provider: openai_compatible
        system_prompt: You review haiku.
        prompt: "Review draft {{{{.turn}}}}: {{{{.reply}}}}"
        options: {{base_url: "{url}", model: reviewer}}
      until: 'message == "APPROVED"'
      max_turns: 4
    on_success: done
  done: {{type: terminal, message: "{{{{.states.draft.Output}}}}"}}
"""


def cost(request: RecordedRequest) -> int:
    """What the server reported for one request: prompt + completion tokens."""
    assert request.usage_sent is not None
    return request.usage_sent["prompt_tokens"] + request.usage_sent["completion_tokens"]


async def test_every_token_figure_is_the_providers_reported_usage(run_yaml) -> None:
    with OpenAIServer() as server:
        server.script(
            Reply.text("Rain on the roof"),
            Reply.text("Make line two shorter"),
            Reply.text("Rain taps the roof softly now"),
            Reply.text("APPROVED"),
        )
        sink = Collect()
        result = await run_yaml(EXCHANGE.format(url=server.base_url), sink=sink)
    assert result.ok, result.error
    writer = [r for r in server.requests if r.body["model"] == "writer"]
    reviewer = [r for r in server.requests if r.body["model"] == "reviewer"]
    assert (len(writer), len(reviewer)) == (2, 2)
    # The partner was sent its template, turn numbers from 1.
    assert reviewer[0].body["messages"][-1]["content"] == "Review draft 1: Rain on the roof"
    assert reviewer[1].body["messages"][-1]["content"].startswith("Review draft 2: ")

    step = result.steps["draft"]
    conv = step.conversation
    reported = [cost(r) for r in server.requests]  # in the order they were made
    total = sum(reported)

    # Each reply, on each side, in the order of the exchange: the turns in the state...
    replies = [t for t in conv.turns if t.role == "assistant" or t.by_partner]
    assert [t.tokens for t in replies] == reported
    assert not any(t.tokens_estimated for t in replies)
    # ...what the person typed (here: the step's prompt) costs nothing of its own
    assert [t.tokens for t in conv.turns if t.role in ("system", "user") and not t.by_partner] == [
        0,
        0,
    ]
    # ...the live line of each reply
    finished = sink.of(ev.TurnFinished)
    assert [(e.speaker, e.tokens) for e in finished] == [
        ("", reported[0]),
        ("reviewer", reported[1]),
        ("", reported[2]),
        ("reviewer", reported[3]),
    ]
    assert not any(e.tokens_estimated for e in finished)

    # The step: input and output as reported, both sides.
    assert step.tokens_input == sum(r.usage_sent["prompt_tokens"] for r in server.requests)
    assert step.tokens_output == sum(r.usage_sent["completion_tokens"] for r in server.requests)
    assert step.tokens_used == total and not step.tokens_estimated
    # The conversation: both sides, the partner's share of it.
    assert conv.total_tokens == total == sum(t.tokens for t in conv.turns)
    assert conv.partner_tokens == cost(reviewer[0]) + cost(reviewer[1])
    # The run: StepFinished, the summary, RunResult.
    [step_finished] = [e for e in sink.of(ev.StepFinished) if e.step == "draft"]
    assert step_finished.tokens == total
    [run_finished] = sink.of(ev.RunFinished)
    summary = run_finished.summary
    assert summary.tokens == result.tokens == total and not result.tokens_estimated
    assert [s.tokens for s in summary.steps if s.name == "draft"] == [total]

    # What a person reads: the terminal's live lines and summary, `awf status`, the
    # notebook's summary — the same numbers, no estimate mark.
    err = io.StringIO()
    terminal = TerminalSink("streaming", out=io.StringIO(), err=err)
    for event in sink.events:
        terminal.emit(event)
    shown = err.getvalue()
    for tokens in reported:
        assert f"· {tokens} tokens ·" in shown
    assert re.search(rf"✓ draft \d+\.\d\d s · {total} tokens\n", shown)
    assert f"✓ completed {summary.figures()}" in shown
    status = describe_state(RunState.from_json(result.state.to_json()))
    assert f"tokens    {total} tokens" in status
    assert re.search(rf"completed draft \(\d+\.\d\d s · {total} tokens\)", status)
    for tokens in reported[0::2]:
        assert re.search(rf"agent \[turn \d · {tokens} tokens · ", status)
    for tokens in reported[1::2]:
        assert f"reviewer [{tokens} tokens · " in status
    assert "~" not in status
    assert f"{total} tokens" in summary_html(summary)
    assert f"{total} tokens" in result.summary()

    # The template view later steps read.
    view = step.template_view()["Conversation"]
    assert (view["TotalTokens"], view["PartnerTokens"]) == (total, conv.partner_tokens)
    assert step.template_view()["TokensUsed"] == total


async def test_estimated_figures_are_marked_everywhere(run_yaml) -> None:
    """The scripted provider reports no usage: every figure is the len/4 estimate, and
    each place shows it with `~`."""
    text = """
    name: chat
    states:
      initial: ask
      ask:
        type: agent
        provider: scripted
        prompt: "Say something"
        options: {replies: ["Something to say."]}
        on_success: done
      done: {type: terminal}
    """
    sink = Collect()
    result = await run_yaml(text, sink=sink)
    assert result.ok and result.tokens_estimated
    tokens = result.tokens
    [turn] = sink.of(ev.TurnFinished)
    assert turn.tokens == tokens and turn.tokens_estimated
    summary = sink.of(ev.RunFinished)[0].summary
    assert f"~{tokens} tokens" in summary.figures()
    assert f"~{tokens} tokens" in summary_html(summary)
    assert f"tokens    ~{tokens} tokens" in describe_state(result.state)
