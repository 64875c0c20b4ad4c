"""Reading the files a workflow names (`readFile`, `prompt_file`, `script_file`,
`-i name=@file`): one reader, capped at 1 MiB as AWF's readFile is, so `/dev/zero` or a
huge log is a clear error instead of all the memory; text that is not UTF-8 has its bad
bytes replaced (U+FFFD) rather than failing the run."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

MAX_FILE_BYTES = 1 << 20


class FileTooLarge(Exception):
    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"{path} is larger than {limit // (1 << 20)} MiB")
        self.path = path
        self.limit = limit


def refuse_pipe(path: Path) -> None:
    """Refuse, before opening it, a FIFO or a socket (links followed): opening one for
    reading blocks until a writer comes, which may be never. A device is read as a file is
    (capped: `/dev/zero` is a clear error at the cap). `FileNotFoundError` when `path` does
    not exist, `IsADirectoryError` for a folder, else `OSError` "not a regular file"."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise OSError(errno.EINVAL, "not a regular file (a pipe or a socket)", str(path))


def read_text_capped(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The file's text; `FileTooLarge` past `limit` bytes, `OSError` when unreadable.

    Reads at most `limit + 1` bytes, so a device or a pipe that never ends costs nothing.
    """
    refuse_pipe(path)
    with path.open("rb") as handle:
        data = read_at_most(handle, limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data.decode("utf-8", errors="replace")


def read_at_most(handle: BinaryIO, limit: int, expected: int | None = None) -> bytes:
    """Up to `limit` bytes from `handle`, expecting `expected` (by default, what is left of
    the file by its size). The buffer is sized for what is expected, plus a byte to notice
    a file that grew: a read asked for `limit` bytes allocates them all first, and mapping
    and unmapping megabytes for a small file costs more than reading it (it was most of a
    tool round's time on the event loop, with the built-in Read)."""
    if expected is None:
        try:
            expected = os.fstat(handle.fileno()).st_size - handle.tell()
        except OSError:  # not a regular file after all: read it in pieces
            expected = 0
    wanted = min(limit, max(expected, 0) + 1)
    data = handle.read(wanted)
    if len(data) == wanted < limit:  # it grew (or its size said nothing): the rest
        data += handle.read(limit - wanted)
    return data
