"""The run history: one row per run in SQLite (`history.db`, WAL mode), shared by
processes, threads and notebook kernels; what `awf history` lists.

Each thread keeps its own connection to the file, opened on its first call and reused:
opening one (and setting it up) cost more than the write itself, and an eval writes a row
at every run's start and end. A connection is opened again when the file it was opened on
is gone or replaced (moved away because damaged, a folder deleted), and in a forked child
(SQLite connections must not cross a fork)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from awf_nb.engine.statuses import RunStatus
from awf_nb.engine.summary import format_duration
from awf_nb.errors import AwfSystemError, UserError
from awf_nb.store.files import Layout, create_private, system_error

if TYPE_CHECKING:  # the state models (pydantic) are imported only where a state is read
    from awf_nb.engine.state import RunState

_SQLITE_BUSY_TIMEOUT_MS = 5000
_RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

_HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id        TEXT PRIMARY KEY,
    workflow      TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    completed_at  TEXT,
    duration      REAL NOT NULL DEFAULT 0,
    tokens        INTEGER NOT NULL DEFAULT 0,
    error         TEXT NOT NULL DEFAULT '',
    inputs        TEXT NOT NULL DEFAULT '{}',
    parent_run_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at);
CREATE INDEX IF NOT EXISTS runs_workflow ON runs (workflow, started_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status, started_at);
"""

_UPSERT_RUN = """
INSERT INTO runs (run_id, workflow, status, started_at, completed_at, duration, tokens,
                  error, inputs, parent_run_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO UPDATE SET
    workflow = excluded.workflow, status = excluded.status,
    started_at = excluded.started_at, completed_at = excluded.completed_at,
    duration = excluded.duration, tokens = excluded.tokens, error = excluded.error,
    inputs = excluded.inputs, parent_run_id = excluded.parent_run_id
"""

_HISTORY_COLUMNS = (
    "run_id, workflow, status, started_at, completed_at, duration, tokens, error, inputs, "
    "parent_run_id"
)


@dataclass(frozen=True)
class HistoryEntry:
    """One run as the history lists it."""

    run_id: str
    workflow: str
    status: str
    started_at: datetime
    completed_at: datetime | None
    duration: float
    tokens: int
    error: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (`awf history --json`): times as ISO 8601 strings."""
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "started_at": self.started_at.isoformat(),
            "completed_at": self.completed_at.isoformat() if self.completed_at else None,
            "duration": self.duration,
            "tokens": self.tokens,
            "error": self.error,
            "inputs": self.inputs,
            "parent_run_id": self.parent_run_id,
        }


class RunHistory:
    """The history file of a store (`layout` tells a run's state file, to show a "running"
    row whose process is gone as interrupted)."""

    def __init__(self, path: Path, layout: Layout, *, durable: bool = True) -> None:
        self.path = path
        self._durable = durable
        self._state_path = layout.state_path
        self._ensure_dir = layout.ensure_dir
        self._schema_ready = False
        self._local = threading.local()  # this thread's (connection, file identity, pid)

    def record(self, state: RunState) -> None:
        """Insert or update the run's history row."""
        self.record_many([state])

    def record_many(self, states: list[RunState]) -> None:
        """Insert or update the runs' history rows, in one transaction (nothing to do for
        none); a run given twice keeps the later."""
        if not states:
            return
        with self._connect() as db:
            db.executemany(_UPSERT_RUN, [_row(state) for state in states])

    def entries(
        self, workflow: str | None = None, status: str | None = None, limit: int | None = 20
    ) -> list[HistoryEntry]:
        """Runs, newest first, optionally of one workflow and/or one status.

        `limit=None` lists every run.
        """
        if status is not None and status not in _RUN_STATUSES:
            raise UserError(
                f'unknown run status "{status}" (expected one of: {", ".join(_RUN_STATUSES)})'
            )
        if limit is not None and limit < 1:
            raise UserError(f"the number of runs to list must be at least 1, got {limit}")
        if not self.path.exists():
            return []
        where: list[str] = []
        params: list[str | int] = []
        if workflow is not None:
            where.append("workflow = ?")
            params.append(workflow)
        if status is not None:
            # interrupted runs are stored as "running": their process is gone
            where.append("status = ?")
            params.append("running" if status == "interrupted" else status)
        query = f"SELECT {_HISTORY_COLUMNS} FROM runs"
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY started_at DESC, run_id DESC"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        with self._connect() as db:
            rows = db.execute(query, params).fetchall()
        entries = [self._shown(_history_entry(row)) for row in rows]
        return [e for e in entries if status is None or e.status == status]

    def _shown(self, entry: HistoryEntry) -> HistoryEntry:
        """A "running" row whose process is gone shows as "interrupted"."""
        if entry.status != "running":
            return entry
        from awf_nb.engine.state import RunState

        try:
            state = RunState.from_json(self._state_path(entry.run_id).read_bytes())
        except (OSError, ValueError, UserError):
            return entry
        return dataclasses.replace(entry, status=state.shown_status())

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, in one transaction (commit on success, roll back on
        error); processes, threads and kernels share the file."""
        db = self._thread_connection()
        try:
            with db:
                yield db
        except sqlite3.Error as exc:
            self._forget_connection()  # a damaged file or a broken handle: start afresh
            raise _db_error(self.path, exc) from exc

    def _thread_connection(self) -> sqlite3.Connection:
        held = getattr(self._local, "held", None)
        try:
            stat = os.stat(self.path)
            identity: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
        except OSError:
            identity = None
        if held is not None:
            db, opened_on, pid = held
            if identity == opened_on and pid == os.getpid():
                return db
            self._forget_connection()
        self._ensure_dir(self.path.parent)
        if identity is None:
            # SQLite creates the -wal and -shm files with the database file's permissions.
            create_private(self.path)
            self._schema_ready = False
        try:
            db = sqlite3.connect(self.path, timeout=_SQLITE_BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise _db_error(self.path, exc) from exc
        try:
            db.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
            if not self._durable:  # WAL: a killed process loses nothing, a power loss may
                db.execute("PRAGMA synchronous = NORMAL")
            if not self._schema_ready:
                self._init_schema(db)
            stat = os.stat(self.path)
        except (sqlite3.Error, OSError) as exc:
            db.close()
            if isinstance(exc, OSError):
                raise system_error("cannot read", self.path, exc) from exc
            raise _db_error(self.path, exc) from exc
        self._local.held = (db, (stat.st_dev, stat.st_ino), os.getpid())
        return db

    def _forget_connection(self) -> None:
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None and held[2] == os.getpid():  # a parent's is left alone
            with contextlib.suppress(sqlite3.Error):
                held[0].close()

    def _init_schema(self, db: sqlite3.Connection) -> None:
        # WAL lets readers run while another process writes; the mode is stored in the
        # file, so this only changes anything the first time.
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(_HISTORY_SCHEMA)
        self._schema_ready = True


def _row(state: RunState) -> tuple[Any, ...]:
    """The run's history row, as `_UPSERT_RUN` takes it."""
    return (
        state.run_id,
        state.workflow_name,
        state.status,
        _db_time(state.started_at),
        _db_time(state.completed_at) if state.completed_at else None,
        state.duration,
        state.total_tokens,
        state.error,
        json.dumps(state.inputs, ensure_ascii=False, default=str),
        state.parent_run_id,
    )


def _db_time(moment: datetime) -> str:
    # Fixed width UTC text, so that SQLite's text order is time order.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _history_entry(row: tuple[Any, ...]) -> HistoryEntry:
    run_id, workflow, status, started, completed, duration, tokens, error, inputs, parent = row
    try:
        parsed_inputs = json.loads(inputs) if inputs else {}
    except ValueError:
        parsed_inputs = {}
    return HistoryEntry(
        run_id=run_id,
        workflow=workflow,
        status=status,
        started_at=datetime.fromisoformat(started),
        completed_at=datetime.fromisoformat(completed) if completed else None,
        duration=float(duration or 0.0),
        tokens=int(tokens or 0),
        error=error or "",
        inputs=parsed_inputs if isinstance(parsed_inputs, dict) else {},
        parent_run_id=parent or "",
    )


def _db_error(path: Path, exc: sqlite3.Error) -> AwfSystemError:
    if "locked" in str(exc) or "busy" in str(exc):
        return AwfSystemError(
            f"run history {path} is locked by another process "
            f"(still locked after {format_duration(_SQLITE_BUSY_TIMEOUT_MS / 1000)})",
            hint="wait for the other awf (or the program holding the file) to finish, "
            "then try again; the run's own files are saved either way",
        )
    return AwfSystemError(
        f"run history {path} failed: {exc}",
        hint="if the file is damaged, move it away; awf starts a new history",
    )
