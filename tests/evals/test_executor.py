"""The executor seam's plain pieces: a finished run shipped as artifacts into another
store, and the eval's run store (written off the loop) failing loudly."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from awf_nb.errors import AwfSystemError
from awf_nb.evals import run_store
from awf_nb.evals.api import prepare_eval
from awf_nb.evals.executor import ArtifactWriter, collect_artifacts
from awf_nb.store import Store
from tests.support.eval_project import Project

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState

EVAL = 'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\nuser: {provider: scripted, options: {replies: ["more", "exit"]}, persona: p}\n'


async def test_a_run_shipped_as_artifacts_reads_the_same_in_the_other_store(
    project: Project,
) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    result = await prepare_eval(project.write_eval(EVAL), storage=project.store).execute()
    run_id = result.rows[0].run_id
    artifacts = collect_artifacts(project.store, run_id)
    other = Store(project.root / "driver-storage")
    ArtifactWriter(other).write(artifacts)
    shipped, original = other.load_state(run_id), project.store.load_state(run_id)
    assert shipped.to_json() == original.to_json()
    assert other.read_transcript(run_id) == project.store.read_transcript(run_id)
    assert [e.run_id for e in other.history()] == [run_id]
    assert (other.run_dir(run_id) / "workflow.yaml").read_text() == original.workflow_source


async def test_a_state_the_writer_cannot_write_stops_the_eval_resumable(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.rows("cases.jsonl", [{"topic": "a"}, {"topic": "b"}])

    def full_disk(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        raise AwfSystemError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(run_store, "atomic_write", full_disk)
    run = prepare_eval(project.write_eval(EVAL), storage=project.store)
    with pytest.raises(AwfSystemError, match="No space left on device"):
        await run.execute()
    assert run.folder.rows() == []  # no row refers to a run that is not stored
    assert run.folder.manifest().status == "cancelled"  # `--resume` finishes it


async def test_a_run_in_flight_writes_its_state_when_its_shape_changes_not_every_turn(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.engine.state import RunState

    project.rows("cases.jsonl", [{"topic": "bread"}])
    written: list[RunState] = []
    checkpoints: list[str] = []
    real_write, real_save = run_store.atomic_write, run_store.EvalRunStore.save_state

    def counting_write(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        if path.name == "state.json":
            written.append(RunState.from_json(data))
        real_write(path, data, fsync=fsync)

    def counting_save(self, state):  # type: ignore[no-untyped-def]
        checkpoints.append(state.status)
        real_save(self, state)

    monkeypatch.setattr(run_store, "atomic_write", counting_write)
    monkeypatch.setattr(run_store.EvalRunStore, "save_state", counting_save)
    monkeypatch.setattr(run_store, "STATE_DELAY", 0.0)  # each checkpoint queued is written
    result = await prepare_eval(project.write_eval(EVAL), storage=project.store).execute()
    # the conversation's turns are in the transcript; its checkpoints that add a turn (a
    # conversation of a few turns, fewer than STATE_CHECKPOINTS) are not written
    shapes = [run_store.shape(state) for state in written]
    assert len(set(shapes)) == len(shapes)
    assert len(written) <= len(checkpoints) - 3  # the user's three turns: none written
    assert written[0].status == "running" and written[-1].status == "completed"
    state = project.store.load_state(result.rows[0].run_id)
    assert state.status == "completed"
    [conversation] = [s.conversation for s in state.steps.values() if s.conversation]
    assert [t.role for t in conversation.turns].count("user") == 3  # "more", "exit" included


def _chat_state(run_id: str, turns: int, *, live: bool = True) -> RunState:
    """A run in a conversation of `turns` turns (the live ones left out of its file)."""
    from awf_nb.engine.state import ConversationState, RunState, StepState, Turn

    conversation = ConversationState(
        turns=[Turn(role="user" if n % 2 else "assistant", content=f"t{n}") for n in range(turns)],
        live_from=0 if live else None,
    )
    step = StepState(name="chat", status="running", attempt=1, conversation=conversation)
    return RunState(
        run_id=run_id, workflow_name="wf", status="running", current_step="chat",
        steps={"chat": step}, workflow_source="name: wf\n",
    )  # fmt: skip


def _drained(store: run_store.EvalRunStore) -> None:
    """Wait until the writer has done what was queued before (as a killed eval's writer
    had, at the moment of the kill)."""
    done = threading.Event()
    store._submit(done.set)
    done.wait(timeout=30)


def test_a_killed_eval_loses_no_turn_its_state_file_did_not_hold(tmp_path: Path) -> None:
    from awf_nb.engine.state import Turn

    store = run_store.EvalRunStore(tmp_path / "storage")
    run_id = store.new_run_id()
    state = _chat_state(run_id, 0)
    store.save_state(state)  # the conversation starts: written
    for n in range(4):  # turns: in the transcript at once, no state file each
        turn = Turn(role="assistant" if n % 2 == 0 else "user", content=f"reply {n}")
        state.steps["chat"].conversation.turns.append(turn)  # type: ignore[union-attr]
        store.append_turn(run_id, "chat", turn)
        store.save_state(state)
    _drained(store)  # then the process is killed: no settle, no close
    reloaded = Store(tmp_path / "storage").load_state(run_id)
    conversation = reloaded.steps["chat"].conversation
    assert conversation is not None
    assert [t.content for t in conversation.turns] == [f"reply {n}" for n in range(4)]
    assert conversation.total_turns == 2
    store.close()


def test_checkpoints_queued_together_are_one_state_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real_write = run_store.atomic_write

    def counting_write(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        written.append(json.loads(data)["current_step"])
        real_write(path, data, fsync=fsync)

    monkeypatch.setattr(run_store, "atomic_write", counting_write)
    store = run_store.EvalRunStore(tmp_path / "storage")
    writer_busy, writer_free = threading.Event(), threading.Event()

    def busy() -> None:
        writer_busy.set()
        writer_free.wait()

    store._submit(busy)
    writer_busy.wait()
    run_id = store.new_run_id()
    for step in ("first", "second", "third"):  # each a new shape: each queued
        store.save_state(_chat_state(run_id, 0).model_copy(update={"current_step": step}))
    writer_free.set()
    store.close()
    assert written == ["third"]  # the newest, once
    assert (store.run_dir(run_id) / "workflow.yaml").read_text() == "name: wf\n"


def test_turn_only_checkpoints_are_written_every_state_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[int] = []
    real_write = run_store.atomic_write

    def counting_write(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        written.append(json.loads(data)["agent_turns"])
        real_write(path, data, fsync=fsync)

    monkeypatch.setattr(run_store, "atomic_write", counting_write)
    monkeypatch.setattr(run_store, "STATE_DELAY", 0.0)
    store = run_store.EvalRunStore(tmp_path / "storage")
    run_id = store.new_run_id()
    state = _chat_state(run_id, 0)
    store.save_state(state)
    _drained(store)
    monkeypatch.setattr(run_store, "STATE_CHECKPOINTS", 2)
    for turns in range(1, 7):  # only counts change: two kept back, the third written
        state.agent_turns = turns
        store.save_state(state)
        _drained(store)
    assert written == [0, 3, 6]
    store.close()


def test_history_rows_queued_together_are_written_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.engine.state import RunState
    from awf_nb.store.history import RunHistory

    batches: list[list[str]] = []
    real_record_many = RunHistory.record_many

    def noting(self: RunHistory, states: list[RunState]) -> None:
        if states:
            batches.append([s.run_id for s in states])
        real_record_many(self, states)

    monkeypatch.setattr(RunHistory, "record_many", noting)
    store = run_store.EvalRunStore(tmp_path / "storage")
    writer_busy, writer_free = threading.Event(), threading.Event()

    def busy() -> None:
        writer_busy.set()
        writer_free.wait()

    store._submit(busy)  # the writer is busy while the runs start
    writer_busy.wait()
    for index in range(10):
        store.record_run(RunState(run_id=f"r{index}", workflow_name="wf", status="running"))
    writer_free.set()
    store.close()
    assert batches == [[f"r{index}" for index in range(10)]]
    assert len(store.history(limit=None)) == 10


def test_result_lines_are_written_at_once_and_fsynced_in_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from awf_nb.evals import storage
    from awf_nb.evals.results import EvalRow

    folder = storage.EvalFolder.create(Store(tmp_path / "storage"))
    synced: list[str] = []
    real_fsync = os.fsync

    def noting(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1])
        real_fsync(fd)

    monkeypatch.setattr(storage.os, "fsync", noting)
    monkeypatch.setattr(storage, "RESULTS_SYNC_INTERVAL", 3600.0)  # none due in this test
    for case in ("a", "b", "c"):
        folder.append_result(EvalRow(case, 1, passed=True))
    # each line is in the file at once (a killed process keeps it: `--resume` skips it)
    assert [row.case for row in folder.rows()] == ["a", "b", "c"]
    assert synced == ["results.jsonl"]  # the first line; the next two wait for a group
    folder.sync()  # what the eval's end does
    assert synced == ["results.jsonl", "results.jsonl"]
    folder.sync()
    assert len(synced) == 2  # nothing left to force onto the disk


async def test_a_state_write_waiting_for_more_checkpoints_holds_up_no_other_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[tuple[str, str]] = []
    real_write = run_store.atomic_write

    def noting(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        written.append((path.parent.name, json.loads(data)["current_step"]))
        real_write(path, data, fsync=fsync)

    monkeypatch.setattr(run_store, "atomic_write", noting)
    monkeypatch.setattr(run_store, "STATE_DELAY", 3600.0)  # never due in this test
    store = run_store.EvalRunStore(tmp_path / "storage")
    slow, other = store.new_run_id(), store.new_run_id()
    store.save_state(_chat_state(slow, 0).model_copy(update={"current_step": "start"}))
    _drained(store)
    store.save_state(_chat_state(slow, 0).model_copy(update={"current_step": "next"}))  # waits
    store.save_state(_chat_state(other, 0))  # a run's first state: written at once
    _drained(store)
    assert written == [(slow, "start"), (other, "chat")]
    await store.asettle(slow)  # the run ends: what waits is written before it is settled
    assert written[-1] == (slow, "next")
    assert store.load_state(slow).current_step == "next"
    store.close()
