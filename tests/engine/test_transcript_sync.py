"""The transcript's group commit, seen from a run: lines are written as they happen and
fsynced together — before every state checkpoint and before the person is asked anything
(a message, a tool confirmation) — not one fsync per line."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.events import ToolCallFinished
from awf_nb.engine.state import Turn
from awf_nb.runs import prepare_run
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.tool_models import Confirming, ScriptedModel, workflow
from tests.support.waiting import until


class Ledger:
    """One list of what happened, in order: a transcript line written ("append"), an
    fsync of a transcript ("sync") or of another file ("file": a state file, the workflow
    source), and the person asked something ("ask")."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.events: list[str] = []
        real = os.fsync

        def fsync(fd: int) -> None:
            self.events.append(self._kind(os.fstat(fd)))
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    def _kind(self, st: os.stat_result) -> str:
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        transcripts = {p.stat().st_ino for p in self.root.glob("runs/*/transcript.jsonl")}
        return "sync" if st.st_ino in transcripts else "file"

    def saved_since_written_at(self, kind: str) -> list[bool]:
        """For each `kind` event: was a state file (or another file) fsynced after the last
        transcript line written before it?"""
        return self._flag_at(kind, raised_by="file", lowered_by="append", raised=True)

    def unsynced_at(self, kind: str) -> list[bool]:
        """For each `kind` event ("end": the end of the list): were transcript lines
        written and not yet fsynced?"""
        return self._flag_at(kind, raised_by="append", lowered_by="sync", raised=False)

    def _flag_at(self, kind: str, *, raised_by: str, lowered_by: str, raised: bool) -> list[bool]:
        seen = []
        for event in [*self.events, "end"]:
            if event == raised_by:
                raised = True
            elif event == lowered_by:
                raised = False
            elif event == kind:
                seen.append(raised)
        return seen


class LedgerStore(Store):
    def __init__(self, root: Path, ledger: Ledger) -> None:
        super().__init__(root)
        self.ledger = ledger

    def append_transcript(self, run_id: str, record: dict[str, Any]) -> int:
        line = super().append_transcript(run_id, record)
        self.ledger.events.append("append")
        return line

    def append_turn(self, run_id: str, step: str, turn: Turn, **extra: Any) -> int:
        line = super().append_turn(run_id, step, turn, **extra)
        self.ledger.events.append("append")
        return line


class AskingReader(Confirming):
    """Answers from lists, noting in the ledger each time the person is asked."""

    def __init__(self, ledger: Ledger, answers: list[bool], replies: list[str]) -> None:
        super().__init__(answers, replies)
        self.ledger = ledger

    async def read(self, prompt: str) -> str | None:
        self.ledger.events.append("ask")
        return await super().read(prompt)

    async def confirm(self, question: str) -> bool | None:
        self.ledger.events.append("ask")
        return await super().confirm(question)


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    return Ledger(tmp_path / "storage", monkeypatch)


async def run(text: str, model: Any, workdir: Path, ledger: Ledger, **kwargs: Any) -> Any:
    runner = prepare_run(
        load_text(text),
        storage=LedgerStore(ledger.root, ledger),
        cwd=workdir,
        providers=lambda name: model,
        **kwargs,
    ).runner
    return await asyncio.wait_for(runner.execute(), 60)


async def test_tool_rounds_fsync_the_transcript_at_checkpoints_not_per_line(
    workdir: Path, ledger: Ledger
):
    (workdir / "n.txt").write_text("x")
    model = ScriptedModel([[("Read", {"file_path": "n.txt"})]] * 5 + ["Done."])
    state = await run(workflow("{builtin: [Read]}"), model, workdir, ledger)
    assert state.status == "completed", state.error
    appended, synced = ledger.events.count("append"), ledger.events.count("sync")
    assert appended == 12  # the prompt, 6 replies, 5 results
    assert 1 <= synced <= ledger.events.count("file")  # at most one per checkpoint
    assert ledger.unsynced_at("file") == [False] * ledger.events.count("file")
    assert ledger.unsynced_at("end") == [False]  # the run ends with every line on disk


async def test_a_conversation_s_tool_rounds_are_checkpointed_with_its_reply_not_each(
    workdir: Path, ledger: Ledger
):
    """A state checkpoint costs fsyncs: a reply that takes five tool rounds is saved as
    often as one that takes one (its lines are in the transcript as they are written)."""
    (workdir / "n.txt").write_text("x")
    saves = []
    for rounds in (1, 5):
        model = ScriptedModel([[("Read", {"file_path": "n.txt"})]] * rounds + ["Done."])
        reader = AskingReader(ledger, [], [""])
        ledger.events.clear()
        text = workflow("{builtin: [Read]}", mode="conversation")
        state = await run(text, model, workdir, ledger, reader=reader)
        assert state.status == "completed", state.error
        assert ledger.events.count("append") == 2 + 2 * rounds  # prompt, reply, calls, results
        saves.append(ledger.events.count("file"))
    assert saves[0] == saves[1]
    assert ledger.unsynced_at("ask") == [False]


async def test_a_conversation_is_saved_before_a_tool_confirmation_after_unsaved_rounds(
    workdir: Path, ledger: Ledger
):
    """The rounds of a reply are not saved one by one: when the person is asked to allow a
    call, the state is saved first (a run killed while it waits keeps those rounds' output
    and tokens, not only their transcript lines)."""
    (workdir / "n.txt").write_text("x")
    read = ("Read", {"file_path": "n.txt"})
    model = ScriptedModel([[read], [read], [("Write", {"file_path": "o", "content": "y"})], "ok"])
    reader = AskingReader(ledger, [True], [""])
    text = workflow("{builtin: [Read, Write], confirm: [Write]}", mode="conversation")
    state = await run(text, model, workdir, ledger, reader=reader)
    assert state.status == "completed", state.error
    assert reader.questions  # the person was asked to allow the Write
    assert ledger.saved_since_written_at("ask") == [True, True]
    assert ledger.unsynced_at("ask") == [False, False]


async def test_the_transcript_is_synced_before_a_tool_confirmation(workdir: Path, ledger: Ledger):
    model = ScriptedModel([[("Write", {"file_path": "out.txt", "content": "hi"})], "ok"])
    reader = AskingReader(ledger, [True], [])
    state = await run(
        workflow("{builtin: [Write], confirm: [Write]}"), model, workdir, ledger, reader=reader
    )
    assert state.status == "completed", state.error
    assert reader.questions  # the person was asked
    assert ledger.unsynced_at("ask") == [False]


async def test_the_transcript_is_synced_before_each_message_is_asked_for(
    workdir: Path, ledger: Ledger
):
    (workdir / "n.txt").write_text("x")
    model = ScriptedModel([[("Read", {"file_path": "n.txt"})], "Read it.", "Bye."])
    reader = AskingReader(ledger, [], ["thanks", ""])
    text = workflow("{builtin: [Read]}", mode="conversation")
    state = await run(text, model, workdir, ledger, reader=reader)
    assert state.status == "completed", state.error
    assert ledger.unsynced_at("ask") == [False, False]


async def test_the_transcript_is_synced_before_the_person_speaks_after_ctrl_c_in_a_tool_call(
    workdir: Path, ledger: Ledger
):
    """Ctrl-C during a tool call ends the turn with the results written but no reply to
    checkpoint: the state is saved all the same before the prompt."""
    model = ScriptedModel([[("Bash", {"command": "sleep 60"}), ("Glob", {"pattern": "*"})], "Ok."])
    sink = Collect()
    reader = AskingReader(ledger, [], ["never mind", ""])
    runner = prepare_run(
        load_text(workflow("{builtin: [Bash, Glob]}", mode="conversation")),
        storage=LedgerStore(ledger.root, ledger),
        reader=reader,
        cwd=workdir,
        sink=sink,
        providers=lambda name: model,
    ).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: len(sink.of(ToolCallFinished)) == 1, "the quick Glob to finish")
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    assert state.status == "completed", state.error
    assert [e.outcome for e in sink.of(ToolCallFinished)] == ["", "interrupted"]
    assert ledger.unsynced_at("ask") == [False, False]
    assert ledger.saved_since_written_at("ask") == [True, True]  # the state, not just lines
