"""Reading the files a workflow names (`readFile`, `prompt_file`, `script_file`,
`-i name=@file`): one reader, capped at 1 MiB as AWF's readFile is, so `/dev/zero` or a
huge log is a clear error instead of all the memory; text that is not UTF-8 has its bad
bytes replaced (U+FFFD) rather than failing the run."""

from __future__ import annotations

from pathlib import Path

MAX_FILE_BYTES = 1 << 20


class FileTooLarge(Exception):
    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"{path} is larger than {limit // (1 << 20)} MiB")
        self.path = path
        self.limit = limit


def read_text_capped(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The file's text; `FileTooLarge` past `limit` bytes, `OSError` when unreadable.

    Reads at most `limit + 1` bytes, so a device or a pipe that never ends costs nothing.
    """
    if path.is_dir():
        raise IsADirectoryError(21, "is a directory", str(path))
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data.decode("utf-8", errors="replace")
