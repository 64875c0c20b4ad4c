"""AWF's built-in tools — Read, Write, Edit, Bash, Glob, Grep — confined to a working directory.

Names, arguments and behaviour follow AWF's own built-ins (`awf mcp-serve`), so a workflow
behaves the same under both:

- `Read{path, offset?, limit?}`: the file's text from line `offset` (0-based), at most
  `limit` lines and at most 5 MiB per call (a longer read says where to continue);
- `Write{path, content}`: replaces the file atomically (temp file + rename), creating
  missing folders; at most 5 MiB;
- `Edit{path, old, new, replace_all?}`: replaces the exact text `old` by `new`. `old` must
  occur exactly once unless `replace_all` (AWF replaces the first of several; a model
  editing the wrong one of two identical lines is worse than being asked for context);
- `Bash{command, cwd?, timeout_seconds?}`: bash in the working directory (default 120 s,
  at most 600 s), through the project's process supervisor;
- `Glob{pattern, cwd?}` and `Grep{pattern, path?, glob?, output_mode?, case_insensitive?}`
  (in `tools.search`).

Each tool's arguments are a pydantic model (`tools.args`): its schema is what the model is
shown, its validation what the model's arguments are checked with — Claude Code's spellings
(`file_path`, `old_string`, `new_string`, `-i`) included. Every path is checked by
`tools.paths.Workspace`, and every file is checked again once opened; every failure is a
result with `is_error=True`; all output is secret-masked and capped. Every call has a time
bound: `timeout` (the step's `tools.timeout`) or the tool's default.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import stat
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from awf_nb.engine.ports import ToolResult, ToolSpec
from awf_nb.engine.process import default_shell
from awf_nb.secrets import Masker
from awf_nb.tools import search
from awf_nb.tools.args import BashArgs, EditArgs, ReadArgs, WriteArgs, parse, spec
from awf_nb.tools.output import ToolError, finish, masked
from awf_nb.tools.paths import Workspace
from awf_nb.tools.shell import run_command
from awf_nb.workflow.files import read_at_most

MAX_READ_BYTES = 5 * 1024 * 1024
# A file this small is read on the event loop: handing the read to a thread and back costs
# two thread wake-ups, more than reading a few pages (a tool round's main cost otherwise).
INLINE_READ_BYTES = 64 * 1024
MAX_WRITE_BYTES = 5 * 1024 * 1024
DEFAULT_BASH_TIMEOUT = 120.0
MAX_BASH_TIMEOUT = 600.0

# Bounds of one call of Read, Write, Edit, Glob or Grep (Bash has its own, below).
DEFAULT_FILE_TOOL_TIMEOUT = 60.0
# Read's `offset` skips lines by reading them: past this many bytes it gives up.
MAX_READ_SCAN_BYTES = 256 * 1024 * 1024

SPECS: dict[str, ToolSpec] = {
    "Read": spec(
        "Read",
        "Read a text file. Returns its content from line `offset` (0-based, default 0), at "
        "most `limit` lines, at most 5 MiB per call.",
        ReadArgs,
    ),
    "Write": spec(
        "Write",
        "Write a file (replaces it whole; creates missing folders). At most 5 MiB.",
        WriteArgs,
    ),
    "Edit": spec(
        "Edit",
        "Replace the exact text `old` by `new` in a file. `old` must occur exactly once "
        "(include surrounding lines to make it unique) unless `replace_all` is true.",
        EditArgs,
    ),
    "Bash": spec(
        "Bash",
        "Run a bash command in the working directory. Returns stdout and stderr; a non-zero "
        f"exit code is an error. Timeout: {DEFAULT_BASH_TIMEOUT:g} s unless given (at most "
        f"{MAX_BASH_TIMEOUT:g}).",
        BashArgs,
    ),
    "Glob": search.GLOB_SPEC,
    "Grep": search.GREP_SPEC,
}

_Handler = Callable[["BuiltinTools", dict[str, Any]], Awaitable[str]]


class BuiltinTools:
    """The chosen built-ins, for one working directory (a `ToolSet`).

    `timeout` is the step's `tools.timeout`: the time bound of every call (and the most a
    Bash call may ask for); None keeps each tool's default.
    """

    def __init__(
        self,
        names: Sequence[str],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        masker: Masker,
        timeout: float | None = None,
    ) -> None:
        unknown = [name for name in names if name not in SPECS]
        if unknown:
            raise ValueError(f"unknown built-in tools: {', '.join(unknown)}")
        self.names = list(dict.fromkeys(names))
        self.workspace = Workspace(cwd)
        self.env = dict(env)
        self.masker = masker
        self.timeout = timeout

    def list(self) -> list[ToolSpec]:
        specs = [SPECS[name] for name in self.names]
        if self.timeout is None or "Bash" not in self.names:
            return specs
        bash = SPECS["Bash"]
        description = bash.description.split(" Timeout:")[0] + (
            f" Timeout: {min(self.timeout, DEFAULT_BASH_TIMEOUT):g} s unless given (at most "
            f"{self.timeout:g})."
        )
        return [ToolSpec("Bash", description, bash.parameters) if s is bash else s for s in specs]

    def time_limit(self, name: str) -> float:
        """The longest a call of `name` may take (Bash: the most it may ask for)."""
        if self.timeout is not None:
            return self.timeout
        return MAX_BASH_TIMEOUT if name == "Bash" else DEFAULT_FILE_TOOL_TIMEOUT

    def needs_confirmation(self, name: str) -> bool:
        return False  # the step's `confirm` list decides (awf_nb.tools.StepToolSet)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name not in self.names:
            return ToolResult(f'unknown tool "{name}"', is_error=True)
        try:
            if name == "Bash":
                return await self._bash(arguments)
            limit = self.time_limit(name)
            try:
                async with asyncio.timeout(limit):
                    return ToolResult(await _HANDLERS[name](self, arguments))
            except TimeoutError:
                where = "tools.timeout" if self.timeout is not None else "its time limit"
                raise ToolError(
                    f"stopped after {limit:g} s ({where}): narrow the request"
                ) from None
        except ToolError as exc:
            return ToolResult(self.masker.mask(f"{name}: {exc}"), is_error=True)

    async def aclose(self) -> None:
        return None

    # --- the tools ---------------------------------------------------------------------------

    async def _read(self, arguments: dict[str, Any]) -> str:
        args = parse(ReadArgs, arguments)
        path = self.workspace.real(args.path)
        offset, limit = args.offset, args.limit
        handle, size = _open_regular(path, self.workspace)
        try:
            with handle:
                if size <= INLINE_READ_BYTES and not offset:
                    text, note = _read_lines(None, handle, offset, limit, size)
                else:
                    text, note = await search.in_thread(_read_lines, handle, offset, limit, size)
        except OSError as exc:
            raise ToolError(f"{self.workspace.show(path)}: {exc.strerror or exc}") from None
        if not text and not note:
            if offset:
                return f"(no lines from offset {offset}: the file is shorter)"
            return "(empty file)"
        # A read cut short may end inside a secret: `cut` holds that beginning back.
        return masked(text, self.masker, cut=bool(note)) + note

    async def _write(self, arguments: dict[str, Any]) -> str:
        args = parse(WriteArgs, arguments)
        path = self.workspace.resolve(args.path)
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(f"content is larger than {MAX_WRITE_BYTES // (1024 * 1024)} MiB")
        await asyncio.to_thread(_atomic_write, path, data, self.workspace)
        return f"wrote {len(data)} bytes to {self.workspace.show(path)}"

    async def _edit(self, arguments: dict[str, Any]) -> str:
        args = parse(EditArgs, arguments)
        path = self.workspace.resolve(args.path)
        if args.old == args.new:
            raise ToolError("old and new are the same: nothing to change")
        return await asyncio.to_thread(
            _edit_file, path, args.old, args.new, args.replace_all, self.workspace
        )

    async def _bash(self, arguments: dict[str, Any]) -> ToolResult:
        args = parse(BashArgs, arguments)
        folder = args.cwd
        cwd = self.workspace.resolve(folder, what="cwd") if folder else self.workspace.root
        if not cwd.is_dir():
            raise ToolError(f"cwd {folder} is not a folder")
        most = self.time_limit("Bash")
        default = min(DEFAULT_BASH_TIMEOUT, most)
        seconds = min(float(args.timeout_seconds), most) if args.timeout_seconds else default
        shell = shutil.which("bash", path=self.env.get("PATH")) or default_shell()
        return await run_command(
            [shell, "-c", args.command],
            cwd=cwd,
            env=self.env,
            timeout=seconds,
            masker=self.masker,
            contain=True,
        )

    async def _glob(self, arguments: dict[str, Any]) -> str:
        return finish(await search.glob_tool(self.workspace, arguments), self.masker)

    async def _grep(self, arguments: dict[str, Any]) -> str:
        return finish(await search.grep_tool(self.workspace, arguments), self.masker)


_HANDLERS: dict[str, _Handler] = {
    "Read": BuiltinTools._read,
    "Write": BuiltinTools._write,
    "Edit": BuiltinTools._edit,
    "Glob": BuiltinTools._glob,
    "Grep": BuiltinTools._grep,
}


# --- file work (in a worker thread, but for small reads: the loop also drives the frontend) ---


def _open_regular(path: Path | str, workspace: Workspace) -> tuple[BinaryIO, int]:
    """`path` opened for reading, and its size, if it is a regular file inside the
    workspace; else `ToolError`.

    What is checked is the file opened, not the path: a symlink leading out, a FIFO or a
    device (whose read could block or never end) swapped in after the path was resolved
    is refused too. Opening does not block on a FIFO (`O_NONBLOCK`, which changes nothing
    for a regular file).
    """
    shown = workspace.show
    try:
        fd = workspace.open_inside(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"{shown(path)} does not exist") from None
    except OSError as exc:
        raise ToolError(f"{shown(path)}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown(path)} is a folder (list it with Glob)")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown(path)} is not a regular file")
        return open(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def _read_lines(
    stop: threading.Event | None, handle: BinaryIO, offset: int, limit: int | None, size: int
) -> tuple[str, str]:
    """The text from line `offset` of a regular file opened as `handle` (of `size` bytes
    when it was opened), and a note when it was cut at MAX_READ_BYTES."""
    if offset and not _skip_lines(handle, offset, stop):
        return "", ""
    data = read_at_most(handle, MAX_READ_BYTES + 1, size - handle.tell())
    cut = len(data) > MAX_READ_BYTES
    data = data[:MAX_READ_BYTES]
    lines = _split_lines(data)
    if limit is not None and len(lines) >= limit and (len(lines) > limit or not cut):
        return b"".join(lines[:limit]).decode("utf-8", errors="replace"), ""
    if not cut:
        return data.decode("utf-8", errors="replace"), ""
    mib = MAX_READ_BYTES // (1024 * 1024)
    if len(lines) == 1 and not lines[0].endswith(b"\n"):
        note = (
            f"\n[line {offset} is longer than {mib} MiB: only its beginning is shown; the "
            f"next line is offset={offset + 1}]"
        )
        return lines[0].decode("utf-8", errors="replace"), note
    if not lines[-1].endswith(b"\n"):
        lines.pop()  # whole lines only
    shown = len(lines)
    note = (
        f"\n[Read stops at {mib} MiB per call: lines {offset} to {offset + shown - 1} shown; "
        f"continue with offset={offset + shown}]"
    )
    return b"".join(lines).decode("utf-8", errors="replace"), note


def _split_lines(data: bytes) -> list[bytes]:
    """Lines ending at `\n` only (as `offset` counts them; `bytes.splitlines` also splits
    at a lone `\r`)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _skip_lines(handle: Any, count: int, stop: threading.Event | None) -> bool:
    """Move past `count` newlines; False when the file has fewer lines. Reads at most
    MAX_READ_SCAN_BYTES (a huge or sparse file), and stops when the call is cancelled."""
    seen = 0
    scanned = 0
    while True:
        if stop is not None and stop.is_set():
            raise ToolError("cancelled")
        if scanned >= MAX_READ_SCAN_BYTES:
            mib = MAX_READ_SCAN_BYTES // (1024 * 1024)
            raise ToolError(
                f"line {count} is not within the first {mib} MiB of the file (it has {seen} "
                "lines there): Read cannot skip further; find the part you need with Grep"
            )
        chunk = handle.read(65536)
        if not chunk:
            return False
        scanned += len(chunk)
        newlines = chunk.count(b"\n")
        if seen + newlines < count:
            seen += newlines
            continue
        index = -1
        for _ in range(count - seen):
            index = chunk.index(b"\n", index + 1)
        handle.seek(index + 1 - len(chunk), os.SEEK_CUR)
        return True


def _atomic_write(path: Path, data: bytes, workspace: Workspace) -> None:
    """Replace `path` by `data`: a temporary file in its folder, renamed over it.

    The folder is opened and checked (it is inside the workspace, whatever its path names
    by now), and the file is made and renamed through that descriptor: a folder swapped
    for a symlink after the path check cannot lead the write outside. A new file gets the
    permissions the umask gives (as `open` in any program would), an existing one keeps
    its own.
    """
    name = path.name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = workspace.open_folder(path.parent)
    except OSError as exc:
        raise ToolError(f"cannot write {name}: {exc.strerror or exc}") from None
    try:
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{name} is a folder")
        tmp = _create_temporary(folder, name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=folder)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if info is not None and stat.S_ISREG(info.st_mode):
                    os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
    except OSError as exc:
        raise ToolError(f"cannot write {name}: {exc.strerror or exc}") from None
    finally:
        os.close(folder)


def _create_temporary(folder: int, name: str) -> str:
    """A new empty file next to `name` in `folder` (a descriptor), created with mode 0666
    less the umask; its name."""
    for _ in range(100):
        tmp = f".{name[:200]}.{secrets.token_hex(4)}.awf-tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                0o666,
                dir_fd=folder,
            )
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(17, "no free temporary name", name)


def _edit_file(path: Path, old: str, new: str, replace_all: bool, workspace: Workspace) -> str:
    handle, size = _open_regular(path, workspace)
    shown = workspace.show(path)
    too_large = f"{shown} is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB"
    try:
        with handle:
            # Editing needs the whole file: refuse rather than rewrite a truncated copy.
            if size > MAX_READ_BYTES:
                raise ToolError(too_large)
            data = read_at_most(handle, MAX_READ_BYTES + 1, size)
        if len(data) > MAX_READ_BYTES:  # it grew past the limit since it was opened
            raise ToolError(too_large)
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text") from None
    except OSError as exc:
        raise ToolError(f"{shown}: {exc.strerror or exc}") from None
    count = content.count(old)
    if count == 0:
        raise ToolError(f"old text not found in {shown}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old text occurs {count} times in {shown}: include more of the surrounding "
            "text to make it unique, or set replace_all"
        )
    _atomic_write(path, content.replace(old, new).encode("utf-8"), workspace)
    return f"replaced {count} occurrence{'s' if count > 1 else ''} in {shown}"
