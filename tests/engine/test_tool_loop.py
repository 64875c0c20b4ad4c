"""Chat mode: a reply with tool calls runs the tools and continues; a reply without tool
calls hands the turn to the person or ends the step. Confirmation, max_rounds, errors as
results, interruption, resume repair — with the real built-in tools, and a model that
follows a script, run twice: the scripted provider, and a fake OpenAI-compatible server on
127.0.0.1 that the openai_compatible provider talks to (streamed `tool_calls`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.events import AwaitingConfirmation, ToolCallFinished, ToolCallStarted
from awf_nb.engine.ports import Message, TurnRequest
from awf_nb.engine.tool_calls import ABANDONED, INTERRUPTED, NOBODY_TO_ASK, REFUSED
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.runs import Resume, prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.tool_models import Confirming, Script, ScriptedModel, numbered_calls, workflow
from tests.support.waiting import until


class ServedModel:
    """The same script served by a fake OpenAI-compatible server and reached through the
    openai_compatible provider; it remembers every request the engine made."""

    name = "openai_compatible"
    session_kind = "history"

    def __init__(self, script: Script, server: OpenAIServer) -> None:
        self.requests: list[TurnRequest] = []
        self.server = server
        self.provider = OpenAICompatibleProvider()
        server.script(
            *(
                Reply.text(entry) if isinstance(entry, str) else Reply.calls(*entry)
                for entry in numbered_calls(script)
            )
        )

    def stream(self, turn: TurnRequest) -> AsyncIterator[object]:
        self.requests.append(turn)
        options = {"base_url": self.server.base_url, "model": "test-model"}
        return self.provider.stream(dataclasses.replace(turn, options=options))

    async def aclose(self) -> None:
        await self.provider.aclose()


MODEL_KIND = "scripted"
SERVER: OpenAIServer | None = None


@pytest.fixture(autouse=True, params=["scripted", "openai-server"])
def model_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs with each kind of model."""
    global MODEL_KIND, SERVER
    MODEL_KIND = request.param
    if request.param == "scripted":
        yield request.param
        return
    with OpenAIServer() as server:
        SERVER = server
        yield request.param
        SERVER = None


def make_model(script: Script) -> ScriptedModel | ServedModel:
    if MODEL_KIND == "scripted":
        return ScriptedModel(script)
    assert SERVER is not None
    return ServedModel(script, SERVER)


async def run(
    text: str,
    model: ScriptedModel | ServedModel,
    workdir: Path,
    store: Store | None = None,
    **kwargs: Any,
) -> Any:
    sink = kwargs.pop("sink", Collect())
    runner = prepare_run(
        load_text(text),
        storage=store,
        cwd=workdir,
        sink=sink,
        providers=lambda name: model,
        **kwargs,
    ).runner
    state = await asyncio.wait_for(runner.execute(), 60)
    return state, sink


def roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


async def test_a_reply_with_tool_calls_runs_them_and_continues(workdir: Path, store: Store):
    (workdir / "notes.md").write_text("buy milk\n")
    model = make_model([[("Read", {"file_path": "notes.md"})], "You need milk."])
    state, sink = await run(workflow("{builtin: [Read]}") + "", model, workdir, store)
    assert state.status == "completed", state.error
    assert state.steps["work"].output == "You need milk."
    first, second = model.requests
    assert [t.name for t in first.tools] == ["Read"] and not first.continues
    assert second.continues and second.prompt == ""
    assert roles(second.history) == ["user", "assistant", "tool"]
    call = second.history[1].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("Read", {"file_path": "notes.md"})
    result = second.history[2]
    assert result.tool_call_id == call.id and "buy milk" in result.content
    started, finished = sink.of(ToolCallStarted), sink.of(ToolCallFinished)
    assert [e.name for e in started] == ["Read"] and not finished[0].is_error
    # persisted as it happened: the transcript holds the call and its result
    lines = [json.loads(x) for x in store.transcript_path(state.run_id).read_text().splitlines()]
    tool_lines = [x for x in lines if x.get("role") == "tool"]
    assert tool_lines and tool_lines[0]["tool_call_id"] == call.id
    # and the run's result holds them too, in order
    turns = state.steps["work"].conversation.turns
    assert [(t.role, t.name) for t in turns] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "Read"),
        ("assistant", ""),
    ]
    assert turns[1].tool_calls[0]["name"] == "Read" and turns[3].content == "You need milk."


async def test_parallel_calls_come_back_in_call_order(workdir: Path):
    (workdir / "a.txt").write_text("alpha")
    slow = {"command": "sleep 0.3; echo slow-done"}
    model = make_model([[("Bash", slow), ("Read", {"file_path": "a.txt"})], "ok"])
    state, sink = await run(workflow("{builtin: [Bash, Read]}"), model, workdir)
    assert state.status == "completed", state.error
    history = model.requests[1].history
    assert [m.name for m in history if m.role == "tool"] == ["Bash", "Read"]
    assert "slow-done" in history[2].content and "alpha" in history[3].content
    # they ran together: the quick Read finished before the slow Bash
    assert [e.name for e in sink.of(ToolCallFinished)] == ["Read", "Bash"]


async def test_errors_are_results_and_the_step_goes_on(workdir: Path):
    model = make_model(
        [
            [
                ("Nope", {}),
                ("Read", "{not json"),
                ("Read", {"file_path": "../outside.txt"}),
                ("Read", "[1, 2]"),
            ],
            "done",
        ]
    )
    state, sink = await run(workflow("{builtin: [Read]}"), model, workdir)
    assert state.status == "completed", state.error
    results = [m for m in model.requests[1].history if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["call_1", "call_2", "call_3", "call_4"]
    assert "unknown tool" in results[0].content
    assert "not valid JSON" in results[1].content
    assert "outside" in results[2].content.lower() or "working directory" in results[2].content
    assert "must be a JSON object" in results[3].content
    assert all(e.is_error for e in sink.of(ToolCallFinished))


async def test_max_rounds_fails_the_step(workdir: Path):
    model = make_model([[("Glob", {"pattern": "*"})]] * 5)
    state, _ = await run(workflow("{builtin: [Glob], max_rounds: 2}"), model, workdir)
    assert state.status == "failed"
    assert "still calls tools after 2 rounds (tools.max_rounds)" in state.error
    assert len(model.requests) == 3


async def test_a_reply_without_calls_hands_the_turn_to_the_person(workdir: Path):
    (workdir / "n.txt").write_text("x")
    model = make_model(
        [[("Read", {"file_path": "n.txt"})], "Read it.", [("Glob", {"pattern": "*"})], "Two."]
    )
    state, _ = await run(
        workflow("{builtin: [Read, Glob]}", mode="conversation"),
        model,
        workdir,
        reader=ScriptedReader(["now list", ""]),
    )
    assert state.status == "completed", state.error
    conv = state.steps["work"].conversation
    assert conv.total_turns == 2  # the rounds of a reply are one turn
    assert len(model.requests) == 4
    # turn 2 starts from the whole history: calls and results included
    assert roles(model.requests[2].history) == ["user", "assistant", "tool", "assistant"]
    assert model.requests[2].prompt == "now list"
    assert [t.role for t in conv.turns] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("answers", "yes", "result", "outcome"),
    [([True], False, "written", ""), ([False], False, REFUSED, "refused")],
)
async def test_confirm_asks_the_person(
    workdir: Path, answers: list[bool], yes: bool, result: str, outcome: str
):
    model = make_model([[("Write", {"file_path": "out.txt", "content": "hi"})], "ok"])
    reader = Confirming(answers)
    state, sink = await run(
        workflow("{builtin: [Write], confirm: [Write]}"), model, workdir, reader=reader, yes=yes
    )
    assert state.status == "completed", state.error
    assert reader.questions == ['Allow Write({"file_path": "out.txt", "content": "hi"})?']
    assert [e.name for e in sink.of(AwaitingConfirmation)] == ["Write"]
    [finished] = sink.of(ToolCallFinished)
    assert finished.outcome == outcome
    assert (workdir / "out.txt").exists() == (outcome == "")
    if outcome:
        assert model.requests[1].history[-1].content == result


async def test_headless_refuses_confirmable_tools_unless_yes(workdir: Path):
    for yes, written in ((False, False), (True, True)):
        model = make_model([[("Write", {"file_path": "o.txt", "content": "x"})], "ok"])
        state, _ = await run(
            workflow("{builtin: [Write], confirm: [Write]}"), model, workdir, yes=yes
        )
        assert state.status == "completed", state.error
        assert (workdir / "o.txt").exists() == written
        if not written:
            assert model.requests[1].history[-1].content == NOBODY_TO_ASK


class StoppedClock:
    """`time` for the tool loop, whose clock moves only when the test says so."""

    now = 100.0

    @classmethod
    def monotonic(cls) -> float:
        return cls.now


async def test_ctrl_c_during_a_tool_call_records_interrupted_and_opens_the_prompt(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
):
    from awf_nb.engine import tool_calls

    monkeypatch.setattr(tool_calls, "time", StoppedClock)
    StoppedClock.now = 100.0
    model = make_model([[("Bash", {"command": "sleep 60"}), ("Glob", {"pattern": "*"})], "Ok."])
    sink = Collect()
    reader = ScriptedReader(["never mind", ""])
    runner = prepare_run(
        load_text(workflow("{builtin: [Bash, Glob]}", mode="conversation")),
        reader=reader,
        cwd=workdir,
        sink=sink,
        providers=lambda name: model,
        storage=False,
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: len(sink.of(ToolCallFinished)) == 1, "the quick Glob to finish")
    StoppedClock.now = 107.5  # the slow call has run for 7.5 s when Ctrl-C comes
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    assert state.status == "completed", state.error
    finished = {e.name: e for e in sink.of(ToolCallFinished)}
    assert finished["Bash"].outcome == "interrupted"
    assert finished["Bash"].duration == 7.5  # how long it ran before it was stopped
    assert finished["Glob"].outcome == ""
    # the person had the turn: their message went to the model with every call answered
    second = model.requests[1]
    assert second.prompt == "never mind"
    assert roles(second.history) == ["user", "assistant", "tool", "tool"]
    assert second.history[2].content == INTERRUPTED
    conv = state.steps["work"].conversation
    assert [(t.role, t.name, t.content == INTERRUPTED) for t in conv.turns[2:4]] == [
        ("tool", "Glob", False),
        ("tool", "Bash", True),
    ]  # recorded as they ended


async def test_ctrl_c_during_a_single_tool_call_records_it_interrupted(workdir: Path):
    model = make_model([[("Bash", {"command": "sleep 60"})], "Ok."])
    sink = Collect()
    runner = prepare_run(
        load_text(workflow("{builtin: [Bash]}", mode="conversation")),
        reader=ScriptedReader(["never mind", ""]),
        cwd=workdir,
        sink=sink,
        providers=lambda name: model,
        storage=False,
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: len(sink.of(ToolCallStarted)) == 1, "the call to start")
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    assert state.status == "completed", state.error
    [finished] = sink.of(ToolCallFinished)
    assert finished.outcome == "interrupted"
    second = model.requests[1]
    assert second.prompt == "never mind"
    assert roles(second.history) == ["user", "assistant", "tool"]
    assert second.history[2].content == INTERRUPTED


async def test_resume_repairs_calls_left_without_results(workdir: Path, store: Store):
    (workdir / "n.txt").write_text("x")
    model = make_model([[("Read", {"file_path": "n.txt"})], "Read it."])
    text = workflow("{builtin: [Read]}", mode="conversation")
    state, _ = await run(text, model, workdir, store, reader=ScriptedReader([""]))
    # The process "died" while the call ran: its result never reached the disk.
    run_id = state.run_id
    saved = store.load_state(run_id)
    conv = saved.steps["work"].conversation
    conv.turns = [t for t in conv.turns if t.role != "tool"][:-1]  # ... assistant(tool_calls)
    conv.stopped_by = ""
    saved.steps["work"].status = "running"
    saved.status = "failed"
    saved.current_step = "work"
    store.save_state(saved)

    model = make_model(["Carrying on."] * 3)  # the scripted provider goes on at turn 2
    runner = prepare_run(
        Resume(run_id),
        storage=store,
        cwd=workdir,
        providers=lambda name: model,
        reader=ScriptedReader(["go on", ""]),
    ).runner
    resumed = await asyncio.wait_for(runner.execute(), 60)
    assert resumed.status == "completed", resumed.error
    history = model.requests[0].history
    assert roles(history) == ["user", "assistant", "tool"]
    # nobody stopped the call: awf did (it was killed), and the model is told so
    assert history[2].content == ABANDONED and history[2].tool_call_id == "call_1"
    assert "person" not in history[2].content and "awf stopped" in history[2].content
    assert model.requests[0].prompt == "go on"
