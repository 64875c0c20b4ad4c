"""What a partner agent saw, told the same way everywhere: `{{.turn}}` in its `prompt`
numbers the reply it answers from 1 (as `until`'s `turn`), `PartnerTranscript` is the
message list it was sent, and `awf resume` rebuilds that list exactly as it was live.
A partner's message cut short by the person stepping in is kept, marked interrupted."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import pytest

from awf_nb.engine.events import PERSON, AgentText, TurnFinished
from awf_nb.engine.ports import Message
from awf_nb.frontends.terminal.text import describe_state
from awf_nb.runs import Resume, prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect, Recording
from tests.support.waiting import until

EXCHANGE = """
name: haiku
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    system_prompt: You write haiku.
    prompt: "A haiku about rain"
    options: {replies: ["draft one", "draft two", "draft three", "draft four"]DELAY}
    conversation:
      with:
        name: reviewer
        provider: scripted
        system_prompt: You review haiku.
        prompt: "Review draft {{.turn}}: {{.reply}}"
        options: {replies: ["more rain", "more wind", "APPROVED"]}
      until: 'message == "APPROVED"'
      max_turns: 6
    on_success: done
  done: {type: terminal, message: "{{.states.draft.Output}}"}
"""


def exchange(delay_ms: int = 0) -> str:
    return textwrap.dedent(EXCHANGE.replace("DELAY", f", delay_ms: {delay_ms}" if delay_ms else ""))


def sent_to(recording: Recording, speaker: str) -> list[tuple[str, list[Message]]]:
    """(prompt, history) of each request the provider got from `speaker`."""
    return [(r.prompt, list(r.history)) for r in recording.requests if r.speaker == speaker]


async def test_the_partner_transcript_is_what_the_partner_was_sent(store, workdir) -> None:
    recording = Recording()
    state = await prepare_run(
        load_text(exchange()), storage=store, cwd=workdir, providers=recording
    ).runner.execute()
    assert state.status == "completed", state.error
    reviewer = sent_to(recording, "reviewer")
    assert [prompt for prompt, _ in reviewer] == [
        "Review draft 1: draft one",
        "Review draft 2: draft two",
        "Review draft 3: draft three",
    ]
    # Its history is what it was sent and what it answered, turn after turn...
    last_prompt, last_history = reviewer[-1]
    assert last_history == [
        Message("user", "Review draft 1: draft one"),
        Message("assistant", "more rain"),
        Message("user", "Review draft 2: draft two"),
        Message("assistant", "more wind"),
    ]
    # ...and PartnerTranscript is that same list, with its last exchange.
    conv = state.steps["draft"].conversation
    seen = [(t["role"], t["content"]) for t in conv.partner_transcript()]
    expected = [(m.role, m.content) for m in last_history]
    assert seen == [*expected, ("user", last_prompt), ("assistant", "APPROVED")]
    view = state.steps["draft"].template_view()["Conversation"]
    assert view["PartnerTranscript"] == conv.partner_transcript()
    assert view["PartnerMessage"] == "APPROVED"


async def test_resume_rebuilds_the_partners_history_as_it_was_live(store, workdir) -> None:
    """The same exchange, once straight through and once cancelled after the reviewer's
    second message and resumed: the reviewer's third request is the same in both."""
    live = Recording()
    straight = await prepare_run(
        load_text(exchange()), storage=store, cwd=workdir, providers=live
    ).runner.execute()
    assert straight.status == "completed", straight.error

    class CancelAfterTwoReviews(Collect):
        runner: Any = None

        def emit(self, event: Any) -> None:
            super().emit(event)
            reviews = [e for e in self.of(TurnFinished) if e.speaker == "reviewer"]
            if isinstance(event, TurnFinished) and len(reviews) == 2:
                self.runner.cancel()

    sink = CancelAfterTwoReviews()
    runner = prepare_run(
        load_text(exchange()), storage=store, cwd=workdir, providers=Recording(), sink=sink
    ).runner
    sink.runner = runner
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(runner.execute(), 30)
    saved = store.load_state(runner.run_id)
    assert saved.steps["draft"].conversation.stopped_by == "cancelled"

    resumed_recording = Recording()
    resumed = await asyncio.wait_for(
        prepare_run(
            Resume(runner.run_id), storage=store, cwd=workdir, providers=resumed_recording
        ).runner.execute(),
        30,
    )
    assert resumed.status == "completed", resumed.error
    [after_resume] = sent_to(resumed_recording, "reviewer")
    assert after_resume == sent_to(live, "reviewer")[2]
    assert after_resume[0] == "Review draft 3: draft three"  # {{.turn}} is still 3, not 1
    # The two runs' records of the exchange are the same too.
    straight_conv = straight.steps["draft"].conversation
    resumed_conv = resumed.steps["draft"].conversation
    assert resumed_conv.partner_transcript() == straight_conv.partner_transcript()
    assert [(t.role, t.speaker, t.content, t.sent) for t in resumed_conv.turns] == [
        (t.role, t.speaker, t.content, t.sent) for t in straight_conv.turns
    ]


async def test_stepping_in_keeps_the_partners_half_written_message(store, workdir) -> None:
    text = exchange().replace(
        'options: {replies: ["more rain", "more wind", "APPROVED"]}',
        'options: {replies: ["the second line could be much shorter", "APPROVED"], delay_ms: 40}',
    )
    sink = Collect()
    recording = Recording()
    runner = prepare_run(
        load_text(text),
        reader=ScriptedReader(["make it about snow"]),
        storage=store,
        cwd=workdir,
        sink=sink,
        providers=recording,
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(
        lambda: any(e.speaker == "reviewer" for e in sink.of(AgentText)),
        "the reviewer to start writing",
    )
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    assert state.status == "completed", state.error

    turns = state.steps["draft"].conversation.turns
    cut = next(t for t in turns if t.speaker == "reviewer")
    assert cut.interrupted and cut.content  # kept, however far it had got
    assert "the second line could be much shorter".startswith(cut.content)
    assert cut.content != "the second line could be much shorter"
    assert cut.tokens > 0  # what it wrote so far cost tokens
    after = turns[turns.index(cut) + 1]
    assert (after.speaker, after.content) == (PERSON, "make it about snow")
    # The writer got the person's message, never the cut one...
    writer_second = sent_to(recording, "")[1]
    assert writer_second[0] == "make it about snow"
    assert all(m.content != cut.content for m in writer_second[1])
    # ...the reviewer's own history keeps what it had written
    reviewer_second = sent_to(recording, "reviewer")[1]
    assert reviewer_second[1] == [
        Message("user", "Review draft 1: draft one"),
        Message("assistant", cut.content),
    ]
    partner = state.steps["draft"].conversation.partner_transcript()
    assert partner[1] == {
        "role": "assistant",
        "content": cut.content,
        "speaker": "reviewer",
        "interrupted": True,
    }
    assert f"reviewer [~{cut.tokens} tokens · " in describe_state(state)
    assert f"{cut.content} [interrupted]" in describe_state(state)
