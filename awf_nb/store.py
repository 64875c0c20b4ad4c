"""Durable storage of runs: state files, transcripts and the run history.

Layout under the storage root (`--storage`, else `$AWF_STORAGE`, else
`$XDG_DATA_HOME/awf`, else `~/.local/share/awf`):

    runs/<run_id>/state.json        the RunState, replaced atomically at every checkpoint
    runs/<run_id>/workflow.yaml     the workflow text exactly as written (for resume)
    runs/<run_id>/transcript.jsonl  one JSON line per message or tool call, append-only
    history.db                      one row per run (SQLite, WAL: shared by processes)
    input_history                   readline history of the terminal reader

A live conversation's turns are not rewritten into the state file at every turn: the
turns from `ConversationState.live_from` on are appended to the transcript and put back
by `load_state`, so a per-turn checkpoint costs the same at turn 10 and turn 1,000.

State files are fsynced at every checkpoint; transcript lines are fsynced in groups, with
the next checkpoint (see `Store` for what a killed process or a power loss keeps).

The store writes what it is given; masking secrets is the engine's job. Everything here is
private to the user (folders 0700, files 0600): the workflow text is kept unmasked, because
a resumed run needs it exactly as written, and it is never shown (`RunState.to_json`
leaves it out).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from awf_nb.engine.statuses import RunStatus
from awf_nb.errors import AwfSystemError, UserError

if TYPE_CHECKING:  # the state models (pydantic) are imported only where a state is read
    from awf_nb.engine.state import ConversationState, RunState, Turn

STATE_FILE = "state.json"
SOURCE_FILE = "workflow.yaml"
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
TRANSCRIPT_FILE = "transcript.jsonl"
HISTORY_FILE = "history.db"
INPUT_HISTORY_FILE = "input_history"
STORAGE_VERSION = 1  # the newest RunState.storage_version this code can read

_SQLITE_BUSY_TIMEOUT_MS = 5000
_RUN_ID_ATTEMPTS = 100
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


def default_root() -> Path:
    """`$AWF_STORAGE`, else `$XDG_DATA_HOME/awf`, else `~/.local/share/awf`."""
    if storage := os.environ.get("AWF_STORAGE"):
        return Path(storage).expanduser()
    if data_home := os.environ.get("XDG_DATA_HOME"):
        return Path(data_home).expanduser() / "awf"
    return Path.home() / ".local" / "share" / "awf"


class Store:
    """State files, transcripts and history under one storage root.

    Safe to share between threads; several processes may share a root as long as each
    run is written by one process at a time (the transcript line count is kept in memory).

    What survives what. Every transcript line is written with one `write` before the
    engine goes on, so a killed process (`kill -9`, Ctrl-C, a crash of awf) loses nothing:
    the kernel has the bytes. Forcing them onto the disk (fsync) is done in groups, not
    after every line: a run's unsynced lines are fsynced by `save_state` before the state
    file is written (so a saved state never refers to lines that are not on disk) — at
    every checkpoint: a step transition, a conversation turn, the end of the run — and by
    `sync_transcript`, which the engine calls before it asks the person for input. A power
    loss or a kernel crash may cost the lines written since the last checkpoint; the
    state file on disk describes the run as it was then, and `awf resume` redoes the rest.

    `durable=False` (an eval's many runs in one process) writes the same files the same
    way — a killed process still loses nothing — but forces nothing onto the disk at a
    checkpoint: a run's files are fsynced once, by `settle(run_id)` when it has ended. A
    power loss may then cost the runs in flight, which an eval reruns anyway; fsyncs on
    the event loop at every turn of hundreds of conversations would stall them all.
    """

    def __init__(self, root: Path | str | None = None, *, durable: bool = True) -> None:
        self.durable = durable
        self._to_settle: set[str] = set()  # runs written since their last `settle`
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.runs_dir = self.root / "runs"
        self.history_path = self.root / HISTORY_FILE
        self.input_history_path = self.root / INPUT_HISTORY_FILE
        self._lock = threading.Lock()
        self._transcript_lines: dict[str, int] = {}
        # Runs whose transcript has lines written but not yet fsynced (group commit), and
        # the descriptors their lines are written with until then (one open per group).
        self._unsynced: set[str] = set()
        self._transcript_fds: dict[str, int] = {}
        weakref.finalize(self, _close_all, self._transcript_fds)
        self._sync_lock = threading.Lock()  # a second sync waits for the fsync under way
        self._schema_ready = False
        self._dirs_ready: set[Path] = set()
        self._step_heads: dict[str, bytes] = {}  # b'{"step":<name>,' by step name
        self._sources_saved: set[str] = set()

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # -- runs ---------------------------------------------------------------------------

    def new_run_id(self) -> str:
        """A new run id (`20261122-030501-3fa9c1`: UTC time + random hex), reserved.

        Ids sort by start time; the run directory is created exclusively, so an id is
        unique even when several processes start runs in the same second.
        """
        from awf_nb.engine.state import new_run_id

        self._ensure_dir(self.runs_dir)
        for _ in range(_RUN_ID_ATTEMPTS):
            run_id = new_run_id()
            try:
                (self.runs_dir / run_id).mkdir(mode=PRIVATE_DIR)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _system_error("cannot create run directory", self.runs_dir, exc) from exc
            return run_id
        raise AwfSystemError(f"cannot find a free run id in {self.runs_dir}")

    def run_dir(self, run_id: str) -> Path:
        if not _is_plain_name(run_id):
            # an id like "../x" would read or write outside the storage directory
            raise UserError(f'invalid run id "{run_id}"')
        return self.runs_dir / run_id

    def state_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / STATE_FILE

    def transcript_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / TRANSCRIPT_FILE

    def list_run_ids(self) -> list[str]:
        """Ids of the runs that have a state file, oldest first."""
        if not self.runs_dir.is_dir():
            return []
        try:
            return sorted(
                entry.name for entry in self.runs_dir.iterdir() if (entry / STATE_FILE).is_file()
            )
        except OSError as exc:
            raise _system_error("cannot list runs in", self.runs_dir, exc) from exc

    def resolve_run_id(self, run_id: str) -> str:
        """The full id of the run `run_id` names: an exact id or a unique prefix of one."""
        if _is_plain_name(run_id) and self.state_path(run_id).is_file():
            return run_id
        matches = [rid for rid in self.list_run_ids() if run_id and rid.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UserError(
                f'run "{run_id}" not found in {self.root}',
                hint="`awf history` lists the runs; --storage or $AWF_STORAGE selects another "
                "storage directory",
            )
        shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
        raise UserError(
            f'run id "{run_id}" is ambiguous in {self.root}: it starts {len(matches)} run ids '
            f"({shown})",
            hint="give more characters of the id",
        )

    # -- state --------------------------------------------------------------------------

    def save_state(self, state: RunState) -> None:
        """Write the state file atomically (a reader sees the old or the new file, whole).

        The turns of a live conversation from `live_from` on are left out: they are in the
        transcript already, and `load_state` puts them back. The run's transcript is
        fsynced first, so the state on disk never refers to lines that are not.
        """
        path = self.state_path(state.run_id)
        self.sync_transcript(state.run_id)
        self._ensure_dir(path.parent)
        if state.workflow_source and state.run_id not in self._sources_saved:
            source = path.parent / SOURCE_FILE
            if not source.exists():
                _atomic_write(source, state.workflow_source.encode(), fsync=self.durable)
            self._sources_saved.add(state.run_id)
        _atomic_write(path, _checkpoint_view(state).to_json().encode(), fsync=self.durable)
        if not self.durable:
            self._to_settle.add(state.run_id)

    def load_state(self, run_id: str) -> RunState:
        """The run's state, live conversation turns restored from its transcript.

        `run_id` may be a unique prefix of the id.
        """
        from awf_nb.engine.state import RunState

        run_id = self.resolve_run_id(run_id)
        path = self.state_path(run_id)
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise _system_error("cannot read", path, exc) from exc
        try:
            state = RunState.from_json(text)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise UserError(
                f"state file {path} is corrupt: {_describe(exc)}",
                hint="the run cannot be shown or resumed; delete its directory to drop it",
            ) from exc
        if state.storage_version > STORAGE_VERSION:
            raise UserError(
                f"state file {path} was written by a newer awf-nb "
                f"(storage version {state.storage_version})",
                hint="upgrade awf-nb to read it",
            )
        source = path.parent / SOURCE_FILE
        if not state.workflow_source and source.is_file():
            try:
                state.workflow_source = source.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"cannot read {source}: {_describe(exc)}") from exc
        self._restore_live_turns(state)
        # A run marked running whose process is gone (kill -9, a crash) is interrupted.
        state.status = state.shown_status()  # type: ignore[assignment]
        return state

    def _restore_live_turns(self, state: RunState) -> None:
        live = {
            name: step.conversation
            for name, step in state.steps.items()
            if step.conversation is not None and step.conversation.live_from is not None
        }
        if not live:
            return
        first_line = min(conv.transcript_line for conv in live.values())
        records = self.read_transcript(state.run_id, first_line)
        for name, conv in live.items():
            kept = conv.turns[: conv.live_from]
            offset = conv.transcript_line - first_line
            restored = [
                self._turn_from_record(state.run_id, record)
                for record in records[offset:]
                if record.get("step") == name
                and (
                    record.get("role") in ("user", "assistant", "system")
                    # a tool's result in chat mode; a bare `tool` line notes what an agent
                    # CLI ran in its own turn, which is no message of the conversation
                    or (record.get("role") == "tool" and record.get("tool_call_id"))
                )
            ]
            conv.turns = kept + restored
            # The transcript is written before the state file: after a crash between the
            # two, the turns are right and the saved count may be one short.
            conv.total_turns = conv.count_replies()

    def _turn_from_record(self, run_id: str, record: dict[str, Any]) -> Turn:
        from awf_nb.engine.state import Turn

        fields = {key: record[key] for key in Turn.model_fields if key in record}
        try:
            return Turn.model_validate(fields)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise UserError(
                f"transcript {self.transcript_path(run_id)} is corrupt: {_describe(exc)}"
            ) from exc

    # -- transcript ---------------------------------------------------------------------

    def append_transcript(self, run_id: str, record: dict[str, Any]) -> int:
        """Append one record as a JSON line; its 0-based line number.

        The line is written with one `write` (a killed process keeps it) and fsynced later,
        with the others written since, by `sync_transcript` (which every `save_state`
        calls). A `ts` (UTC, ISO 8601) is added when the record has none.
        """
        if "ts" not in record:
            record = {**record, "ts": datetime.now(UTC).isoformat()}
        return self._append_line(run_id, _json_line(record))

    def append_turn(self, run_id: str, step: str, turn: Turn, **extra: Any) -> int:
        """Append a conversation turn of `step` to the transcript (`step`, the turn's
        fields, `extra`, `ts`); its line number. The same line as `append_transcript` of
        those fields, with the turn encoded by its model's own serializer: a line is
        written for every message, tool call and tool result, and this is the cheaper way."""
        fields = turn.__pydantic_serializer__.to_json(turn)  # b'{"role":…}', as dumped
        # A timestamp's ISO text is plain ASCII: it needs no JSON encoder (a line per
        # message, call and result makes this a hot path).
        ts = datetime.now(UTC).isoformat().encode()
        if extra:
            extra.pop("ts", None)  # the line's own time wins, as in `append_transcript`
        tail = _json_line(extra)[1:-2] + b"," if extra else b""
        head = self._step_heads.get(step)
        if head is None:
            head = self._step_heads[step] = b'{"step":' + _json_line(step)[:-1] + b","
        line = (head, fields[1:-1], b",", tail, b'"ts":"', ts, b'"}\n')
        return self._append_line(run_id, b"".join(line))

    def _append_line(self, run_id: str, data: bytes) -> int:
        """Write one whole line (`data`, its newline included); its line number."""
        with self._lock:
            count = self._transcript_lines.get(run_id)
            fd = self._transcript_fds.get(run_id)
            try:
                if fd is None:
                    path = self.transcript_path(run_id)
                    if count is None:
                        self._ensure_dir(path.parent)
                        count = _count_lines_dropping_torn_tail(path)
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
                    self._transcript_fds[run_id] = fd
                _write_all(fd, data)
            except OSError as exc:
                # the line may be half written: count again on the next append
                self._transcript_lines.pop(run_id, None)
                if (fd := self._transcript_fds.pop(run_id, None)) is not None:
                    os.close(fd)
                raise _system_error("cannot write", self.transcript_path(run_id), exc) from exc
            assert count is not None  # counted when the run's first line was written
            self._transcript_lines[run_id] = count + 1
            self._unsynced.add(run_id)
        return count

    def sync_transcript(self, run_id: str) -> None:
        """Force the run's transcript lines written so far onto the disk (fsync), if any
        are not yet: before the person is asked for input, when a step or the run ends."""
        with self._sync_lock:
            with self._lock:  # appends only wait for this, never for the fsync
                if run_id not in self._unsynced:
                    return
                self._unsynced.discard(run_id)
                # the next line opens the file again: nothing is held open between groups
                fd = self._transcript_fds.pop(run_id, None)
                if not self.durable:  # fsynced once, when the run has ended (`settle`)
                    self._to_settle.add(run_id)
            if not self.durable:
                if fd is not None:
                    os.close(fd)
                return
            path = self.transcript_path(run_id)
            try:
                if fd is not None:
                    os.fsync(fd)
                else:
                    _fsync_file(path)
            except OSError as exc:
                with self._lock:
                    self._unsynced.add(run_id)  # not durable yet: the next checkpoint retries
                raise _system_error("cannot write", path, exc) from exc
            finally:
                if fd is not None:
                    os.close(fd)

    def settle(self, run_id: str) -> None:
        """Force a run's files (transcript, state, workflow text, folder) onto the disk:
        what `durable=False` leaves to the end of a run. Does nothing for a durable store."""
        if self.durable:
            return
        self.sync_transcript(run_id)
        with self._lock:
            self._to_settle.discard(run_id)
        folder = self.run_dir(run_id)
        for name in (TRANSCRIPT_FILE, STATE_FILE, SOURCE_FILE):
            try:
                _fsync_file(folder / name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise _system_error("cannot write", folder / name, exc) from exc
        _fsync_dir(folder)

    def read_transcript(self, run_id: str, start: int = 0) -> list[dict[str, Any]]:
        """The transcript's records from line `start` on.

        A last line without its newline is the remnant of a killed writer and is skipped.
        """
        path = self.transcript_path(run_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if path.parent.is_dir():
                return []
            raise UserError(f'run "{run_id}" not found in {self.root}') from None
        except OSError as exc:
            raise _system_error("cannot read", path, exc) from exc
        lines = data.split(b"\n")[:-1]  # the last piece is "" or a torn line
        records: list[dict[str, Any]] = []
        for number in range(max(0, start), len(lines)):
            try:
                record = json.loads(lines[number])
            except ValueError as exc:
                raise UserError(
                    f"transcript {path} is corrupt at line {number + 1}: {exc}"
                ) from exc
            if not isinstance(record, dict):
                raise UserError(
                    f"transcript {path} is corrupt at line {number + 1}: not a JSON object"
                )
            records.append(record)
        return records

    # -- history ------------------------------------------------------------------------

    def record_run(self, state: RunState) -> None:
        """Insert or update the run's history row."""
        row = (
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
        with self._history() as db:
            db.execute(_UPSERT_RUN, row)

    def history(
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
        if not self.history_path.exists():
            return []
        where, params = [], []
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
        with self._history() as db:
            rows = db.execute(query, params).fetchall()
        entries = [self._shown(_history_entry(row)) for row in rows]
        return [e for e in entries if status is None or e.status == status]

    def _shown(self, entry: HistoryEntry) -> HistoryEntry:
        """A "running" row whose process is gone shows as "interrupted"."""
        if entry.status != "running":
            return entry
        from awf_nb.engine.state import RunState

        try:
            state = RunState.from_json(self.state_path(entry.run_id).read_bytes())
        except (OSError, ValueError, UserError):
            return entry
        return dataclasses.replace(entry, status=state.shown_status())

    @contextlib.contextmanager
    def _history(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call (processes, threads and kernels share the file)."""
        self._ensure_dir(self.root)
        if not self._schema_ready:
            # SQLite creates the -wal and -shm files with the database file's permissions.
            _create_private(self.history_path)
        try:
            db = sqlite3.connect(self.history_path, timeout=_SQLITE_BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise _db_error(self.history_path, exc) from exc
        try:
            db.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
            if not self.durable:  # WAL: a killed process loses nothing, a power loss may
                db.execute("PRAGMA synchronous = NORMAL")
            if not self._schema_ready:
                self._init_schema(db)
            with db:  # one transaction: commit on success, roll back on error
                yield db
        except sqlite3.Error as exc:
            raise _db_error(self.history_path, exc) from exc
        finally:
            db.close()

    def _init_schema(self, db: sqlite3.Connection) -> None:
        # WAL lets readers run while another process writes; the mode is stored in the
        # file, so this only changes anything the first time.
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(_HISTORY_SCHEMA)
        self._schema_ready = True

    # -- helpers ------------------------------------------------------------------------

    def _ensure_dir(self, path: Path) -> None:
        """Create `path` private to the user (the storage root and everything under it)."""
        if path in self._dirs_ready:
            return
        try:
            missing = [p for p in (path, *path.parents) if not p.exists()]
            path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            for created in missing:
                if created == self.root or self.root in created.parents:
                    os.chmod(created, PRIVATE_DIR)
        except OSError as exc:
            raise _system_error("cannot create storage directory", path, exc) from exc
        self._dirs_ready.add(path)


def _checkpoint_view(state: RunState) -> RunState:
    """`state` as the state file holds it: live conversations cut at `live_from`.

    Shallow copies only, so the cost does not grow with the number of live turns.
    """
    steps = dict(state.steps)
    changed = False
    for name, step in state.steps.items():
        conv = step.conversation
        if conv is None or conv.live_from is None or len(conv.turns) <= conv.live_from:
            continue
        trimmed: ConversationState = conv.model_copy(update={"turns": conv.turns[: conv.live_from]})
        steps[name] = step.model_copy(update={"conversation": trimmed})
        changed = True
    return state.model_copy(update={"steps": steps}) if changed else state


def _atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Temp file in the same directory, write, fsync, rename over `path`, fsync the dir
    (`fsync=False`: the same, without forcing anything onto the disk)."""
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _system_error("cannot write", path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            if fsync:
                os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise _system_error("cannot write", path, exc) from exc
    if fsync:
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    # Makes the rename itself durable. Not every platform / file system can open or fsync
    # a directory; the file's own fsync already happened, so that is not an error.
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _create_private(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist yet."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return
    except OSError as exc:
        raise _system_error("cannot create", path, exc) from exc
    os.close(fd)


def _json_line(record: Any) -> bytes:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return (line + "\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # one write: a line is in the file whole, or torn at a kill
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def _close_all(fds: dict[str, int]) -> None:
    """Close the descriptors a store that is gone left open (its lines are written)."""
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


def _fsync_file(path: Path) -> None:
    """fsync `path`: its data written through any descriptor reaches the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _count_lines_dropping_torn_tail(path: Path) -> int:
    """Complete lines in `path`; a torn last line (killed writer) is cut off first, so the
    next record starts on a line of its own."""
    try:
        with path.open("r+b") as file:
            count = 0
            last_newline_end = 0
            offset = 0
            while chunk := file.read(1 << 20):
                newlines = chunk.count(b"\n")
                if newlines:
                    count += newlines
                    last_newline_end = offset + chunk.rindex(b"\n") + 1
                offset += len(chunk)
            if last_newline_end != offset:
                file.truncate(last_newline_end)
            return count
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise _system_error("cannot read", path, exc) from exc


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


def _is_plain_name(run_id: str) -> bool:
    """A run id that cannot escape the runs directory."""
    return bool(run_id) and run_id not in (".", "..") and "/" not in run_id and "\\" not in run_id


def _describe(exc: Exception) -> str:
    """One line saying what is wrong with a file's content."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{where}: {first['msg']}{more}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _system_error(action: str, path: Path, exc: OSError) -> AwfSystemError:
    reason = exc.strerror or str(exc)
    return AwfSystemError(
        f"{action} {path}: {reason}",
        hint="check that the storage directory is writable and the disk is not full "
        "(--storage or $AWF_STORAGE chooses another one)",
    )


def _db_error(path: Path, exc: sqlite3.Error) -> AwfSystemError:
    if "locked" in str(exc) or "busy" in str(exc):
        return AwfSystemError(
            f"run history {path} is locked by another process "
            f"(still locked after {_SQLITE_BUSY_TIMEOUT_MS // 1000}s)",
            hint="wait for the other awf (or the program holding the file) to finish, "
            "then try again; the run's own files are saved either way",
        )
    return AwfSystemError(
        f"run history {path} failed: {exc}",
        hint="if the file is damaged, move it away; awf starts a new history",
    )
