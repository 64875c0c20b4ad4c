"""Files private to the user, written so that a crash leaves them whole: the storage's
low-level writes (atomic replace, whole-line appends, fsync) and the errors they raise."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from awf_nb.errors import AwfSystemError, UserError

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
STATE_FILE = "state.json"
SOURCE_FILE = "workflow.yaml"
TRANSCRIPT_FILE = "transcript.jsonl"


class Layout:
    """Where a store's files are (`runs/<run_id>/…` under its root), and the making of
    its folders, private to the user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs_dir = root / "runs"
        self._dirs_ready: set[Path] = set()

    def run_dir(self, run_id: str) -> Path:
        if not is_plain_name(run_id):
            # an id like "../x" would read or write outside the storage directory
            raise UserError(f'invalid run id "{run_id}"')
        return self.runs_dir / run_id

    def state_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / STATE_FILE

    def transcript_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / TRANSCRIPT_FILE

    def ensure_dir(self, path: Path) -> None:
        """Create `path` private to the user (the storage root and everything under it)."""
        if path in self._dirs_ready:
            return
        try:
            missing = []  # up to the first folder that exists (a run's: the runs folder)
            for folder in (path, *path.parents):
                if folder.exists():
                    break
                missing.append(folder)
            path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            for created in missing:
                if created == self.root or self.root in created.parents:
                    os.chmod(created, PRIVATE_DIR)
        except OSError as exc:
            raise system_error("cannot create storage directory", path, exc) from exc
        self._dirs_ready.add(path)


def is_plain_name(run_id: str) -> bool:
    """A run id that cannot escape the runs directory."""
    return bool(run_id) and run_id not in (".", "..") and "/" not in run_id and "\\" not in run_id


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Temp file in the same directory, write, fsync, rename over `path`, fsync the dir
    (`fsync=False`: the same, without forcing anything onto the disk)."""
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise system_error("cannot write", path, exc) from exc
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
        raise system_error("cannot write", path, exc) from exc
    if fsync:
        fsync_dir(path.parent)


# Workflow texts a store remembers where it wrote last (see `SourceCopies`), at most.
MAX_SOURCE_COPIES = 16


class SourceCopies:
    """Writes a run's workflow text (`workflow.yaml`), sharing one copy between the runs
    of the same text: an eval's hundreds of runs all run one workflow (or a few variants).

    The first run of a text writes its file; the next ones are hard links to it, which cost
    a folder entry instead of a page of data each. Where a link cannot be made (a file
    system without hard links, the first copy deleted, too many links), the file is
    written as before and becomes the copy the next runs link to. The file is never
    changed once written (a resumed run reads it), so the runs sharing it cannot tell.
    Safe to share between threads (at worst two runs write their own copies).
    """

    def __init__(self, limit: int = MAX_SOURCE_COPIES) -> None:
        self._limit = limit
        self._copies: dict[str, Path] = {}  # sha256 of the text -> a file holding it

    def write(self, path: Path, text: str, *, fsync: bool) -> None:
        """`text` as the file `path` (left alone if it exists already)."""
        if path.exists():
            return
        data = text.encode()
        key = hashlib.sha256(data).hexdigest()
        copy = self._copies.get(key)
        if copy is not None:
            try:
                os.link(copy, path)
            except FileExistsError:
                return
            except OSError:
                pass  # written below instead
            else:
                if fsync:
                    fsync_dir(path.parent)
                return
        atomic_write(path, data, fsync=fsync)
        self._copies.pop(key, None)
        self._copies[key] = path
        while len(self._copies) > self._limit:  # the oldest text is forgotten first
            del self._copies[next(iter(self._copies))]


def fsync_dir(path: Path) -> None:
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


def create_private(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist yet."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return
    except OSError as exc:
        raise system_error("cannot create", path, exc) from exc
    os.close(fd)


def json_line(record: Any) -> bytes:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return (line + "\n").encode()


def write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # one write: a line is in the file whole, or torn at a kill
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def close_all(fds: dict[str, int]) -> None:
    """Close the descriptors a store that is gone left open (its lines are written)."""
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


def fsync_file(path: Path) -> None:
    """fsync `path`: its data written through any descriptor reaches the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def count_lines_dropping_torn_tail(path: Path) -> int:
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
        raise system_error("cannot read", path, exc) from exc


def drop_torn_tail(path: Path) -> None:
    """A last line without its newline (the writer was killed) is cut off, so the next
    record starts on a line of its own."""
    try:
        with path.open("r+b") as file:
            size = file.seek(0, os.SEEK_END)
            if size == 0:
                return
            file.seek(size - 1)
            if file.read(1) == b"\n":
                return
            # Rare (a kill mid-write): find the last newline from the end.
            step = 4096
            end = size
            while end > 0:
                start = max(0, end - step)
                file.seek(start)
                chunk = file.read(end - start)
                found = chunk.rfind(b"\n")
                if found >= 0:
                    file.truncate(start + found + 1)
                    return
                end = start
            file.truncate(0)
    except FileNotFoundError:
        return


def system_error(action: str, path: Path, exc: OSError) -> AwfSystemError:
    reason = exc.strerror or str(exc)
    return AwfSystemError(
        f"{action} {path}: {reason}",
        hint="check that the storage directory is writable and the disk is not full "
        "(--storage or $AWF_STORAGE chooses another one)",
    )
