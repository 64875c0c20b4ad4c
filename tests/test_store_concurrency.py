"""Many processes sharing one storage root: ids, state files, transcripts and history."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from awf_nb.engine.state import ConversationState, RunState, StepState, Turn
from awf_nb.store import Store

PROCESSES = 50
SAVES = 5


def run_one(root: str, worker: int) -> None:
    """One process's run: 5 checkpoints, a transcript line each, history at start and end."""
    store = Store(root)
    run_id = store.new_run_id()
    conv = ConversationState(live_from=0)
    state = RunState(
        run_id=run_id,
        workflow_name=f"wf{worker % 3}",
        status="running",
        inputs={"worker": worker},
        steps={"chat": StepState(name="chat", conversation=conv)},
    )
    store.record_run(state)
    for save in range(SAVES):
        turn = Turn(role="user", content=f"worker {worker} turn {save}")
        line = store.append_turn(run_id, "chat", turn)
        if save == 0:
            conv.transcript_line = line
        conv.turns.append(turn)
        state.message = str(save)
        store.save_state(state)
    state.status = "completed"
    store.record_run(state)


@pytest.mark.slow
def test_fifty_processes_share_one_root(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=run_one, args=(str(root), worker)) for worker in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join(timeout=120)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
    assert [p.exitcode for p in processes] == [0] * PROCESSES

    store = Store(root)
    run_ids = store.list_run_ids()
    assert len(run_ids) == PROCESSES
    workers = set()
    for run_id in run_ids:
        state = store.load_state(run_id)
        assert state.message == str(SAVES - 1)
        worker = state.inputs["worker"]
        workers.add(worker)
        turns = state.steps["chat"].conversation.turns
        assert [t.content for t in turns] == [f"worker {worker} turn {i}" for i in range(SAVES)]
        assert len(store.read_transcript(run_id)) == SAVES
    assert workers == set(range(PROCESSES))

    entries = store.history(limit=None)
    assert len(entries) == PROCESSES
    assert {entry.run_id for entry in entries} == set(run_ids)
    assert all(entry.status == "completed" for entry in entries)
    assert sum(len(store.history(workflow=f"wf{i}", limit=None)) for i in range(3)) == PROCESSES
