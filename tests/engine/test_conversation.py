"""Conversation mode (F083): the loop, exit signals, errors, cancellation, persistence."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awf_nb.engine.events import AwaitingInput, TurnFinished, UserMessage
from awf_nb.runs import prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.readers import BlockingReader
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio

CHAT = """
name: chat
inputs: [{name: topic, default: channels}]
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    system_prompt: Be concise.
    prompt: "Tell me about {{.inputs.topic}}"
    options:
      replies: ["first reply", "second reply", "third reply", "fourth reply"]
      delay_ms: DELAY
    on_success: done
    on_failure: failed
  done: {type: terminal, message: "{{.states.chat.Output}}"}
  failed: {type: terminal, status: failure, message: "chat failed"}
"""


def chat(delay_ms: int = 0) -> str:
    return CHAT.replace("DELAY", str(delay_ms))


async def test_two_messages_then_empty_gives_three_turns(run_yaml):
    sink = Collect()
    result = await run_yaml(chat(), replies=["more please", "and then?", ""], sink=sink)
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.total_turns == 3
    assert conv.stopped_by == "user_exit"
    assert result.outputs["chat"] == "third reply"
    assert [(t.role, t.content) for t in conv.turns] == [
        ("system", "Be concise."),
        ("user", "Tell me about channels"),
        ("assistant", "first reply"),
        ("user", "more please"),
        ("assistant", "second reply"),
        ("user", "and then?"),
        ("assistant", "third reply"),
    ]
    assert [m.text for m in sink.of(UserMessage)] == [
        "Tell me about channels",
        "more please",
        "and then?",
    ]
    assert len(sink.of(TurnFinished)) == 3
    assert len(sink.of(AwaitingInput)) == 3


@pytest.mark.parametrize("ending", ["", "   ", "exit", "QUIT", "Exit ", None])
async def test_exit_signals(run_yaml, ending):
    replies = ["one more"] + ([ending] if ending is not None else [])
    result = await run_yaml(chat(), replies=replies)
    conv = result.steps["chat"].conversation
    assert conv.total_turns == 2
    assert conv.stopped_by == "user_exit"
    assert result.ok


async def test_headless_run_ends_after_first_reply(run_yaml):
    result = await run_yaml(chat())
    assert result.steps["chat"].conversation.total_turns == 1
    assert result.outputs["chat"] == "first reply"


async def test_history_grows_each_turn(run_yaml, monkeypatch):
    from awf_nb.providers.scripted import ScriptedProvider

    seen = []
    original = ScriptedProvider.stream

    def spy(self, turn):
        seen.append(turn)
        return original(self, turn)

    monkeypatch.setattr(ScriptedProvider, "stream", spy)
    await run_yaml(chat(), replies=["a", "b", ""])
    assert [len(t.history) for t in seen] == [0, 2, 4]
    assert all(t.system_prompt == "Be concise." for t in seen)
    assert [t.turn_number for t in seen] == [1, 2, 3]


async def test_provider_error_mid_conversation(run_yaml):
    text = chat().replace(
        'replies: ["first reply", "second reply", "third reply", "fourth reply"]',
        'replies: ["first reply", {error: "server went away"}]',
    )
    result = await run_yaml(text, replies=["next", ""])
    conv = result.steps["chat"].conversation
    assert conv.stopped_by == "error"
    assert result.steps["chat"].status == "failed"
    assert result.outputs["chat"] == "first reply"  # the last good reply stays
    assert result.message == "chat failed"  # routed to on_failure
    assert "server went away" in result.steps["chat"].error


async def test_reader_blocked_on_input_is_cancelled_quickly(store, workdir):
    reader = BlockingReader()
    runner = prepare_run(load_text(chat()), reader=reader, storage=store, cwd=workdir).runner
    task = asyncio.create_task(runner.execute())
    await asyncio.wait_for(reader.waiting.wait(), 5)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)  # a hang guard: the blocked read must not hold it
    assert reader.cancelled, "the blocked read itself was cancelled"
    assert runner.state.status == "cancelled"
    conv = runner.state.steps["chat"].conversation
    assert conv.stopped_by == "cancelled"
    saved = store.load_state(runner.run_id)
    assert saved.status == "cancelled"
    assert saved.steps["chat"].conversation.stopped_by == "cancelled"
    assert [t.content for t in saved.steps["chat"].conversation.turns][-1] == "first reply"


async def _streaming_first_reply(store, workdir) -> tuple[Any, asyncio.Task[Any]]:
    """A chat run started, its first reply streaming (slowly) now."""
    sink = Collect()
    reader = ScriptedReader(["go on", ""], delay=0.05)
    runner = prepare_run(
        load_text(chat(delay_ms=40)), reader=reader, storage=store, cwd=workdir, sink=sink
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: bool(sink.text("chat")), "the first reply to stream")
    return runner, task


async def test_interrupt_during_reply_keeps_partial_and_returns_to_prompt(store, workdir):
    runner, task = await _streaming_first_reply(store, workdir)
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 10)
    assert state.status == "completed"
    conv = state.steps["chat"].conversation
    first = conv.turns[2]
    assert first.role == "assistant" and first.interrupted
    assert 0 < len(first.content) < len("first reply")
    assert conv.total_turns == 2  # the interrupted reply, then "second reply"
    assert conv.turns[-1].content == "second reply"


async def test_two_interrupts_in_a_row_interrupt_the_reply_once(store, workdir):
    """A second Ctrl-C before the first took effect is the same interrupt, not a cancel."""
    runner, task = await _streaming_first_reply(store, workdir)
    assert [runner.interrupt(), runner.interrupt()] == ["turn", "turn"]
    state = await asyncio.wait_for(task, 10)
    assert state.status == "completed"
    turns = state.steps["chat"].conversation.turns
    assert turns[2].interrupted and turns[-1].content == "second reply"


async def test_an_interrupt_and_a_cancel_together_cancel_the_run(store, workdir):
    """Stop of the reply and cancel of the run at once: the cancel is not lost."""
    runner, task = await _streaming_first_reply(store, workdir)
    assert runner.interrupt() == "turn"
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert runner.state.status == "cancelled"


async def test_interrupt_at_prompt_cancels_run(store, workdir):
    reader = BlockingReader()
    runner = prepare_run(load_text(chat()), reader=reader, storage=store, cwd=workdir).runner
    task = asyncio.create_task(runner.execute())
    await asyncio.wait_for(reader.waiting.wait(), 5)
    assert runner.interrupt() == "run"
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runner.state.steps["chat"].conversation.stopped_by == "cancelled"


async def test_turn_timeout_stops_with_cancelled(run_yaml):
    text = chat(delay_ms=500).replace(
        "    on_success: done", "    timeout: 300ms\n    on_success: done"
    )
    result = await run_yaml(text, replies=[""])
    conv = result.steps["chat"].conversation
    assert conv.stopped_by == "cancelled"
    assert "timed out after 0.3s" in result.steps["chat"].error


async def test_state_persisted_after_every_turn(store, workdir):
    """While the conversation runs, the state file on disk already holds each turn."""

    class Checking(ScriptedReader):
        def __init__(self) -> None:
            super().__init__(["b", "c", ""])
            self.seen: list[int] = []

        async def read(self, prompt: str) -> str | None:
            saved = store.load_state(runner.run_id)
            self.seen.append(saved.steps["chat"].conversation.total_turns)
            self.seen.append(len(saved.steps["chat"].conversation.turns))
            return await super().read(prompt)

    reader = Checking()
    runner = prepare_run(load_text(chat()), reader=reader, storage=store, cwd=workdir).runner
    await runner.execute()
    assert reader.seen == [1, 3, 2, 5, 3, 7]
    # the transcript holds one line per message
    lines = store.read_transcript(runner.run_id)
    assert [r["role"] for r in lines] == ["system"] + ["user", "assistant"] * 3


async def test_conversation_with_continue_from(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: seed
          seed:
            type: agent
            provider: scripted
            prompt: remember 42
            conversation: {}
            options: {replies: ["ok"]}
            on_success: chat
          chat:
            type: agent
            provider: scripted
            mode: conversation
            prompt: what number?
            conversation: {continue_from: seed}
            options: {replies: ["42", "bye"]}
            on_success: done
          done: {type: terminal}
        """,
        replies=["thanks", ""],
    )
    assert result.ok, result.error
    conv = result.steps["chat"].conversation
    assert conv.total_turns == 3
    assert [t.content for t in conv.turns if t.role == "assistant"] == ["ok", "42", "bye"]


async def test_resume_reopens_the_start_step_once_only(store, workdir):
    """In a resumed run, a conversation inside a loop re-opens in the first iteration only."""
    from awf_nb.runs import Resume, prepare_run

    text = """
name: loop-chat
states:
  initial: each
  each: {type: for_each, items: [1, 2], body: [chat], on_success: done}
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "item {{.loop.Item}}"
    options: {replies: ["r1", "r2", "r3", "r4"]}
  done: {type: terminal}
"""
    first = prepare_run(load_text(text), reader=BlockingReader(), storage=store, cwd=workdir).runner
    task = asyncio.create_task(first.execute())
    await until(
        lambda: bool(
            first.state.steps.get("chat")
            and first.state.steps["chat"].conversation
            and first.state.steps["chat"].conversation.total_turns
        ),
        "the first reply",
    )
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    resumed = prepare_run(
        Resume(first.run_id, from_step="each"),
        storage=store,
        reader=ScriptedReader([""] * 4),
        cwd=workdir,
    ).runner
    state = await resumed.execute()
    assert state.status == "completed", state.error
    conv = state.steps["chat"].conversation
    assert [t.content for t in conv.turns if t.role == "user"] == ["item 2"]


async def test_the_step_timeout_bounds_the_wait_at_the_prompt(store, workdir):
    text = chat().replace("mode: conversation", "mode: conversation\n    timeout: 300ms")
    reader = BlockingReader()  # a person who never answers
    runner = prepare_run(load_text(text), reader=reader, storage=store, cwd=workdir).runner
    state = await asyncio.wait_for(runner.execute(), 30)  # the hang guard
    step = state.steps["chat"]
    assert reader.cancelled
    assert step.status == "failed"
    assert "no message at the prompt within the step timeout (0.3s)" in step.error
    assert step.conversation.stopped_by == "cancelled"
    assert step.output == "first reply"  # the reply before the wait is kept
    saved = store.load_state(runner.run_id)
    assert saved.steps["chat"].conversation.stopped_by == "cancelled"
