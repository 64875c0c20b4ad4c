"""The store an eval's runs are written to: the same files, written off the event loop.

An eval keeps many conversations in flight on one event loop, and the engine checkpoints
a conversation at every turn. On a real disk each checkpoint costs milliseconds of file
system work (write, rename, an SQLite commit) during which no other conversation moves:
with 50 in flight, the waiting adds up to more than the model's own time. So the eval's
runs go to an `EvalRunStore`: a `Store(durable=False)` whose state files and history rows
are handed, already serialized, to one writer thread, in order. Transcript lines are still
written at once (they are small, and the engine counts them).

- A run's state file is written when the run starts and ends, and whenever the shape of
  the run changes (`shape`: a step starts or ends, a conversation starts, a pause, a
  process to clean up after a kill); a checkpoint that only adds a conversation turn is
  kept in memory and written by the next of those, by the run's end, or after
  `STATE_CHECKPOINTS` of them. The turns themselves are in the transcript already,
  appended at once, and `load_state` puts them back, so a state file per turn would be
  bytes and CPU (the whole state serialized) for nothing — and on a disk each replaced
  state file is written at once (ext4 writes a file renamed over another right away).
  Counted in checkpoints, not seconds: a run's writes grow with its conversation, never
  with how long a busy machine makes it last.
  A state write after the run's first waits `STATE_DELAY` in the writer's queue, and the
  run's checkpoints of that moment (its first step, its conversation's start) are one write.
  `awf show` of a run in flight shows its turns (from the transcript) and its steps as
  they are; after a kill, `awf resume` of such a run goes on from its last turn, with
  its token counts as of at most `STATE_CHECKPOINTS` checkpoints before.
- History rows are written in groups, in one SQLite transaction each (at most
  `ROWS_DELAY` after the first of them): rows written together share their pages, so it
  costs a fraction of the bytes and commits of one transaction per row. A run's row may
  reach the history a few seconds after its files are settled; a killed process may lose
  the rows of those seconds: a run that had ended is then shown from its state file, one
  that was starting is rerun by `--resume`.
- A killed process loses what the writer had not written yet: only runs in flight, which
  an eval reruns (`--resume`). `settle(run_id)` waits until the run's writes are done and
  forces its files onto the disk, before the run's row is written.
- A write that fails (a full disk) is raised by the next `settle`, so the eval stops there
  instead of reporting runs that are not stored.
"""

from __future__ import annotations

import asyncio
import collections
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
# A run's checkpoints that only add turns kept back in a row, at most: the next one is
# written (the run's token counts on the disk are never older than that).
STATE_CHECKPOINTS = 16
# Seconds a state write waits in the writer's queue, at most, for the run's next checkpoints
# to be written with it: a run's first step and its conversation's start are checkpoints a
# moment apart, and each state file written is a page on the disk.
STATE_DELAY = 0.25
ROWS_DELAY = 5.0  # seconds a history row waits for others to be written with, at most
MAX_ROWS = 256  # history rows written in one transaction, at most


class EvalRunStore(Store):
    """See the module docstring. Use one per eval (its writer thread ends with `close`)."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(root, durable=False)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._closed = False
        self._kept_back: dict[str, int] = {}  # run id -> checkpoints kept since its write
        self._shapes: dict[str, tuple[Any, ...]] = {}  # run id -> `shape` of that state
        self._pending: dict[str, RunState] = {}  # run id -> its newest unwritten state
        # run id -> its newest state queued for the writer, serialized, and the workflow
        # text to write with it (a later checkpoint replaces it until the writer writes it)
        self._latest: dict[str, tuple[bytes, str | None]] = {}
        self._latest_lock = threading.Lock()
        self._writer = threading.Thread(target=self._work, name="awf-eval-store", daemon=True)
        self._writer.start()

    # -- what the engine calls on the event loop --------------------------------------------

    def save_state(self, state: RunState) -> None:
        self.sync_transcript(state.run_id)  # closes the group's descriptor (no fsync)
        kept = self._kept_back.get(state.run_id)
        if (
            kept is not None
            and kept < STATE_CHECKPOINTS
            and shape(state) == self._shapes.get(state.run_id)
        ):
            self._kept_back[state.run_id] = kept + 1
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
        first = state.run_id not in self._shapes
        self._kept_back[state.run_id] = 0
        self._shapes[state.run_id] = shape(state)
        data = checkpoint_view(state).to_json().encode()
        source = None
        if state.workflow_source and state.run_id not in self._sources_saved:
            source = state.workflow_source
            self._sources_saved.add(state.run_id)
        with self._latest_lock:
            queued = self._latest.get(state.run_id)
            if queued is not None and source is None:
                source = queued[1]  # the workflow text of a write this one replaces
            self._latest[state.run_id] = (data, source)
        self._to_settle.add(state.run_id)
        if queued is None:
            # a run's first state at once: a run the eval lists is in the store
            due = time.monotonic() + (0.0 if first else STATE_DELAY)
            self._submit(_StateWrite(self, state.run_id, due))

    def _write_latest(self, run_id: str) -> None:
        """Write the run's newest queued state (nothing if a job before wrote it)."""
        with self._latest_lock:
            latest = self._latest.pop(run_id, None)
        if latest is None:
            return
        data, source = latest
        path = self.state_path(run_id)
        self._ensure_dir(path.parent)
        if source is not None:
            self._source_copies.write(path.parent / SOURCE_FILE, source, fsync=False)
        atomic_write(path, data, fsync=False)

    def record_run(self, state: RunState) -> None:
        # A run's start and end: its state file is up to date with its history row.
        self._flush_state(state.run_id)
        if state.status != "running":
            self._kept_back.pop(state.run_id, None)
            self._shapes.pop(state.run_id, None)
        # What the history row needs, as it is now (the run goes on changing its state).
        # A shallow copy with the steps left out (their tokens summed): `model_construct`
        # would fill every unset field's default, asking `inspect` about each factory.
        snapshot = state.model_copy(
            update={"inputs": dict(state.inputs), "earlier_tokens": state.total_tokens, "steps": {}}
        )
        self._submit(_Row(self, snapshot))

    # -- the end of a run, and of the eval ----------------------------------------------------

    async def asettle(self, run_id: str) -> None:
        """Wait for the run's writes, then force its files onto the disk."""
        self._flush_state(run_id)
        self._kept_back.pop(run_id, None)
        self._shapes.pop(run_id, None)
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
                    self._write_latest(run_id)  # a write still waiting: now, before
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
        # of the bytes and commits of one transaction per row. A state write waits until
        # it is due (`STATE_DELAY`; one per run is queued at a time, so runs need no order
        # between them); the other jobs meanwhile run in order (a run's settle writes its
        # state first if it is still waiting).
        rows: list[RunState] = []
        first_row = 0.0
        waiting: collections.deque[_StateWrite] = collections.deque()
        while True:
            deadlines = [first_row + ROWS_DELAY] if rows else []
            if waiting:
                deadlines.append(waiting[0].due)
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                job = None
            if isinstance(job, _Row):
                if not rows:
                    first_row = time.monotonic()
                rows.append(job.state)
            elif isinstance(job, _StateWrite) and job.due > time.monotonic():
                waiting.append(job)  # the run's checkpoints of that moment: one write
            elif job is not None and job is not _STOP:
                self._run(job)
            while waiting and (job is _STOP or waiting[0].due <= time.monotonic()):
                self._run(waiting.popleft())
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


def shape(state: RunState) -> tuple[Any, ...]:
    """What of a run's state a resume needs at once, beyond the turns of its live
    conversations (those are in the transcript): the run's and its steps' statuses, where
    each conversation's live turns start, the pauses, the process groups to clean up after
    a kill. Two checkpoints of the same shape differ by turns and counts only."""
    steps = tuple(
        (
            name,
            step.status,
            step.attempt,
            step.visit,
            step.process_group,
            len(step.process_groups),
            None if step.conversation is None else step.conversation.live_from,
            None if step.conversation is None else step.conversation.transcript_line,
        )
        for name, step in state.steps.items()
    )
    return (
        state.status,
        state.current_step,
        len(state.executed),
        tuple(state.paused.items()),
        steps,
    )


class _StateWrite:
    """A run's state to write once `due` (the newest checkpoint queued by then)."""

    def __init__(self, store: EvalRunStore, run_id: str, due: float) -> None:
        self.store, self.run_id, self.due = store, run_id, due

    def __call__(self) -> None:
        self.store._write_latest(self.run_id)


class _Row:
    """A history row to write (the writer thread writes those queued together at once)."""

    def __init__(self, store: EvalRunStore, state: RunState) -> None:
        self.store, self.state = store, state

    def __call__(self) -> None:
        Store.record_run(self.store, self.state)


def _is_settle(job: Callable[[], None]) -> bool:
    return getattr(job, "__name__", "") == "job"
