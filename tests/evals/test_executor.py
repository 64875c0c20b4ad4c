"""The executor seam's plain pieces: a finished run shipped as artifacts into another
store, and the eval's run store (written off the loop) failing loudly."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from awf_nb.errors import AwfSystemError
from awf_nb.evals import run_store
from awf_nb.evals.api import prepare_eval
from awf_nb.evals.executor import ArtifactWriter, collect_artifacts
from awf_nb.store import Store
from tests.support.eval_project import Project

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


async def test_a_run_in_flight_writes_its_state_at_its_start_and_end_not_every_turn(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    written: list[str] = []
    real_write = run_store.atomic_write

    def counting_write(path, data, *, fsync=True):  # type: ignore[no-untyped-def]
        if path.name == "state.json":
            written.append(json.loads(data)["status"])
        real_write(path, data, fsync=fsync)

    monkeypatch.setattr(run_store, "atomic_write", counting_write)
    result = await prepare_eval(project.write_eval(EVAL), storage=project.store).execute()
    # the conversation's turns are in the transcript; its checkpoints in between (a
    # scripted user answers at once, well within STATE_INTERVAL) are not written
    assert written == ["running", "completed"]
    state = project.store.load_state(result.rows[0].run_id)
    assert state.status == "completed"
    [conversation] = [s.conversation for s in state.steps.values() if s.conversation]
    assert [t.role for t in conversation.turns].count("user") == 3  # "more", "exit" included


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
