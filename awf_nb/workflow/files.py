"""Reading the files a workflow names (`readFile`, `prompt_file`, `script_file`,
`-i name=@file`, roles and skills) and the files awf is given (datasets, cassettes): one
reader, capped at 1 MiB as AWF's readFile is, so a huge log is a clear error instead of all
the memory; text that is not UTF-8 has its bad bytes replaced (U+FFFD) rather than failing
the run.

Only regular files are read (`open_regular`): a FIFO would wait for a writer forever, and a
device (`/dev/zero`, a terminal) never ends or waits for input. They are refused before
they are opened, and the file opened is checked again (without waiting on it: `O_NONBLOCK`)
in case it was swapped in between.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

MAX_FILE_BYTES = 1 << 20

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO), whose reading waits for a writer"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """A path that names something other than a regular file or a folder (`strerror`
    says what it is)."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        what = next((name for test, name in _KINDS if test(mode)), "not a file")
        super().__init__(errno.EINVAL, f"not a regular file (it is {what})", os.fspath(path))


def _check_regular(path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFile(path, mode)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading, if it is a regular file; `IsADirectoryError` for a
    folder, `NotRegularFile` for anything else (`OSError`s, as `open` raises them)."""
    _check_regular(path, os.stat(path).st_mode)  # before opening: a FIFO's open may wait
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check_regular(path, os.fstat(fd).st_mode)  # what was opened, in case of a swap
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def fd_path(fd: int) -> str | None:
    """The real path of what `fd` refers to, from the kernel; None where it cannot tell."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    if sys.platform == "darwin":  # pragma: no cover - not in CI
        import fcntl

        try:
            raw = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
        except OSError:
            return None
        return raw.split(b"\0", 1)[0].decode(errors="surrogateescape")
    return None  # pragma: no cover


class FileTooLarge(Exception):
    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"{path} is larger than {limit // (1 << 20)} MiB")
        self.path = path
        self.limit = limit


def read_text_capped(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The text of the regular file `path`; `FileTooLarge` past `limit` bytes, `OSError`
    when unreadable (`NotRegularFile` for a FIFO or a device, see `open_regular`)."""
    with open_regular(path) as handle:
        return read_text_from(handle, path, limit)


def read_text_from(handle: BinaryIO, path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The text of the file open as `handle` (named `path`); `FileTooLarge` past `limit`.
    Reads at most `limit + 1` bytes, so a file that grows without end costs nothing."""
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
