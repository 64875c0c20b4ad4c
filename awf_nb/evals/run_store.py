"""The store an eval's runs are written to: the same files, written off the event loop.

An eval keeps many conversations in flight on one event loop, and the engine checkpoints
a conversation at every turn. On a real disk each checkpoint costs milliseconds of file
system work (write, rename, an SQLite commit) during which no other conversation moves:
with 50 in flight, the waiting adds up to more than the model's own time. So the eval's
runs go to an `EvalRunStore`: a `Store(durable=False)` whose state files and history rows
are handed, already serialized, to one writer thread, in order. Transcript lines are still
written at once (they are small, and the engine counts them).

- A run's state file is written when the run starts and when it ends, and in between at
  most once every `STATE_INTERVAL` seconds (a later checkpoint within the interval is
  kept in memory, and written by the next one past it or the run's end): the conversation's
  turns are in the transcript already, appended at once, and an eval reruns a run that
  did not end (`--resume`), so a state file per turn would be bytes and CPU (the whole
  state serialized) for nothing. `awf show` of a run in flight shows its turns (from the
  transcript) and its steps as of at most `STATE_INTERVAL` ago; after a kill, `awf
  resume` of such a run redoes the steps of that last moment.
- History rows are written in groups, in one SQLite transaction each (at most
  `ROWS_DELAY` after the first of them): rows written together share their pages, so it
  costs a fraction of the bytes and commits of one transaction per row. A run's row may
  reach the history a moment after its files are settled; a killed process may lose the
  rows of that moment: a run that had ended is then shown from its state file, one that
  was starting is rerun by `--resume`.
- A killed process loses what the writer had not written yet: only runs in flight, which
  an eval reruns (`--resume`). `settle(run_id)` waits until the run's writes are done and
  forces its files onto the disk, before the run's row is written.
- A write that fails (a full disk) is raised by the next `settle`, so the eval stops there
  instead of reporting runs that are not stored.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from awf_nb.engine.state import RunState
from awf_nb.store import SOURCE_FILE, Store, checkpoint_view
from awf_nb.store.files import atomic_write

_STOP = object()
STATE_INTERVAL = 5.0  # seconds between two state writes of a run in flight, at most
ROWS_DELAY = 0.5  # seconds a history row waits for others to be written with, at most
MAX_ROWS = 256  # history rows written in one transaction, at most


class EvalRunStore(Store):
    """See the module docstring. Use one per eval (its writer thread ends with `close`)."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(root, durable=False)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._closed = False
        self._last_write: dict[str, float] = {}  # run id -> when its state was last queued
        self._pending: dict[str, RunState] = {}  # run id -> its newest unwritten state
        self._writer = threading.Thread(target=self._work, name="awf-eval-store", daemon=True)
        self._writer.start()

    # -- what the engine calls on the event loop --------------------------------------------

    def save_state(self, state: RunState) -> None:
        self.sync_transcript(state.run_id)  # closes the group's descriptor (no fsync)
        last = self._last_write.get(state.run_id)
        if last is not None and time.monotonic() - last < STATE_INTERVAL:
            self._pending[state.run_id] = state  # written later (see the module doc)
            return
        self._write_state(state)

    def _flush_state(self, run_id: str) -> None:
        """Queue the run's newest checkpoint, if it was kept back."""
        state = self._pending.pop(run_id, None)
        if state is not None:
            self._write_state(state)

    def _write_state(self, state: RunState) -> None:
        """Serialize the state now (the run goes on changing it) and queue its writing."""
        self._pending.pop(state.run_id, None)
        self._last_write[state.run_id] = time.monotonic()
        path = self.state_path(state.run_id)
        data = checkpoint_view(state).to_json().encode()
        source = None
        if state.workflow_source and state.run_id not in self._sources_saved:
            source = state.workflow_source.encode()
            self._sources_saved.add(state.run_id)

        def write() -> None:
            self._ensure_dir(path.parent)
            if source is not None and not (path.parent / SOURCE_FILE).exists():
                atomic_write(path.parent / SOURCE_FILE, source, fsync=False)
            atomic_write(path, data, fsync=False)

        self._to_settle.add(state.run_id)
        self._submit(write)

    def record_run(self, state: RunState) -> None:
        # A run's start and end: its state file is up to date with its history row.
        self._flush_state(state.run_id)
        if state.status != "running":
            self._last_write.pop(state.run_id, None)
        # What the history row needs, as it is now (the run goes on changing its state).
        snapshot = RunState.model_construct(
            run_id=state.run_id,
            workflow_name=state.workflow_name,
            status=state.status,
            started_at=state.started_at,
            completed_at=state.completed_at,
            error=state.error,
            inputs=dict(state.inputs),
            parent_run_id=state.parent_run_id,
            earlier_tokens=state.total_tokens,
            steps={},
        )
        self._submit(_Row(self, snapshot))

    # -- the end of a run, and of the eval ----------------------------------------------------

    async def asettle(self, run_id: str) -> None:
        """Wait for the run's writes, then force its files onto the disk."""
        self._flush_state(run_id)
        self._last_write.pop(run_id, None)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finish(error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def job() -> None:
            error: BaseException | None = self._failure
            if error is None:
                try:
                    Store.settle(self, run_id)
                except BaseException as exc:  # reported to the waiting run
                    error = exc
            loop.call_soon_threadsafe(finish, error)

        self._jobs.put(job)
        await done

    def close(self) -> None:
        """Write what is queued, then end the writer thread; later writes are made at once
        (a run still saving its state after the eval ended loses nothing)."""
        for run_id in list(self._pending):
            self._flush_state(run_id)
        self._jobs.put(_STOP)
        self._writer.join()
        self._closed = True

    def _submit(self, job: Callable[[], None]) -> None:
        if self._closed:
            job()
        else:
            self._jobs.put(job)

    def _work(self) -> None:
        # History rows wait up to ROWS_DELAY (or until MAX_ROWS are waiting) and are then
        # written in one transaction: rows written together share their pages, a fraction
        # of the bytes and commits of one transaction per row. Other jobs run in order.
        rows: list[RunState] = []
        first_row = 0.0
        while True:
            wait = None if not rows else max(0.0, first_row + ROWS_DELAY - time.monotonic())
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                job = None
            if isinstance(job, _Row):
                if not rows:
                    first_row = time.monotonic()
                rows.append(job.state)
            elif job is not None and job is not _STOP:
                self._run(job)
            due = job is None or job is _STOP or len(rows) >= MAX_ROWS
            if rows and (due or time.monotonic() - first_row >= ROWS_DELAY):
                self._run(functools.partial(self._history.record_many, rows))
                rows = []
            if job is _STOP:
                return

    def _run(self, job: Callable[[], None]) -> None:
        if self._failure is not None and not _is_settle(job):
            return  # after a failed write, only report it (at the next settle)
        try:
            job()
        except BaseException as exc:  # surfaced by the next settle
            self._failure = exc


class _Row:
    """A history row to write (the writer thread writes those queued together at once)."""

    def __init__(self, store: EvalRunStore, state: RunState) -> None:
        self.store, self.state = store, state

    def __call__(self) -> None:
        Store.record_run(self.store, self.state)


def _is_settle(job: Callable[[], None]) -> bool:
    return getattr(job, "__name__", "") == "job"
