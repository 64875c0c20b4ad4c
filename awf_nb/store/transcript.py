"""A run's transcript: one JSON line per message, tool call and tool result, appended as
the run goes (`runs/<run_id>/transcript.jsonl`).

Every line is written with one `write` before the engine goes on, so a killed process
loses nothing: the kernel has the bytes. Forcing them onto the disk (fsync) is done in
groups (`sync`), not after every line; see `Store` for when.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from awf_nb.errors import UserError
from awf_nb.store.files import (
    PRIVATE_FILE,
    Layout,
    close_all,
    count_lines_dropping_torn_tail,
    fsync_file,
    json_line,
    system_error,
    write_all,
)

if TYPE_CHECKING:
    from awf_nb.engine.state import Turn


class Transcripts:
    """The transcripts of a store's runs: appending (thread-safe), group fsync, reading.

    Not `durable`: `sync` closes what it holds open but forces nothing onto the disk; the
    run is noted in `to_settle` (its store fsyncs it once, when it has ended)."""

    def __init__(self, layout: Layout, *, durable: bool = True, to_settle: set[str]) -> None:
        self._durable = durable
        self._to_settle = to_settle
        self._root = layout.root
        self._path_of = layout.transcript_path
        self._ensure_dir = layout.ensure_dir
        self._lock = threading.Lock()
        self._lines: dict[str, int] = {}
        # Runs whose transcript has lines written but not yet fsynced (group commit), and
        # the descriptors their lines are written with until then (one open per group).
        self._unsynced: set[str] = set()
        self._fds: dict[str, int] = {}
        weakref.finalize(self, close_all, self._fds)
        self._sync_lock = threading.Lock()  # a second sync waits for the fsync under way
        self._step_heads: dict[str, bytes] = {}  # b'{"step":<name>,' by step name

    def append(self, run_id: str, record: dict[str, Any]) -> int:
        """Append one record as a JSON line; its 0-based line number. A `ts` (UTC, ISO
        8601) is added when the record has none."""
        if "ts" not in record:
            record = {**record, "ts": datetime.now(UTC).isoformat()}
        return self._append_line(run_id, json_line(record))

    def append_turn(self, run_id: str, step: str, turn: Turn, **extra: Any) -> int:
        """Append a conversation turn of `step` (`step`, the turn's fields, `extra`, `ts`);
        its line number. The same line as `append` of those fields, with the turn encoded
        by its model's own serializer: a line is written for every message, tool call and
        tool result, and this is the cheaper way."""
        fields = turn.__pydantic_serializer__.to_json(turn)  # b'{"role":…}', as dumped
        # A timestamp's ISO text is plain ASCII: it needs no JSON encoder (a line per
        # message, call and result makes this a hot path).
        ts = datetime.now(UTC).isoformat().encode()
        if extra:
            extra.pop("ts", None)  # the line's own time wins, as in `append`
        tail = json_line(extra)[1:-2] + b"," if extra else b""
        head = self._step_heads.get(step)
        if head is None:
            head = self._step_heads[step] = b'{"step":' + json_line(step)[:-1] + b","
        line = (head, fields[1:-1], b",", tail, b'"ts":"', ts, b'"}\n')
        return self._append_line(run_id, b"".join(line))

    def _append_line(self, run_id: str, data: bytes) -> int:
        """Write one whole line (`data`, its newline included); its line number."""
        with self._lock:
            count = self._lines.get(run_id)
            fd = self._fds.get(run_id)
            try:
                if fd is None:
                    path = self._path_of(run_id)
                    if count is None:
                        self._ensure_dir(path.parent)
                        count = count_lines_dropping_torn_tail(path)
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
                    self._fds[run_id] = fd
                write_all(fd, data)
            except OSError as exc:
                # the line may be half written: count again on the next append
                self._lines.pop(run_id, None)
                if (fd := self._fds.pop(run_id, None)) is not None:
                    os.close(fd)
                raise system_error("cannot write", self._path_of(run_id), exc) from exc
            assert count is not None  # counted when the run's first line was written
            self._lines[run_id] = count + 1
            self._unsynced.add(run_id)
        return count

    def sync(self, run_id: str) -> None:
        """Force the run's lines written so far onto the disk (fsync), if any are not."""
        with self._sync_lock:
            with self._lock:  # appends only wait for this, never for the fsync
                if run_id not in self._unsynced:
                    return
                self._unsynced.discard(run_id)
                # the next line opens the file again: nothing is held open between groups
                fd = self._fds.pop(run_id, None)
                if not self._durable:  # fsynced once, when the run has ended (`settle`)
                    self._to_settle.add(run_id)
            if not self._durable:
                if fd is not None:
                    os.close(fd)
                return
            path = self._path_of(run_id)
            try:
                if fd is not None:
                    os.fsync(fd)
                else:
                    fsync_file(path)
            except OSError as exc:
                with self._lock:
                    self._unsynced.add(run_id)  # not durable yet: the next checkpoint retries
                raise system_error("cannot write", path, exc) from exc
            finally:
                if fd is not None:
                    os.close(fd)

    def read(self, run_id: str, start: int = 0) -> list[dict[str, Any]]:
        """The transcript's records from line `start` on.

        A last line without its newline is the remnant of a killed writer and is skipped.
        """
        path = self._path_of(run_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if path.parent.is_dir():
                return []
            raise UserError(f'run "{run_id}" not found in {self._root}') from None
        except OSError as exc:
            raise system_error("cannot read", path, exc) from exc
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
