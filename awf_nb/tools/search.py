"""The Glob and Grep built-ins: finding files by name and lines by regular expression.

Both walk the working directory without following symlinked folders (a link cannot lead
the walk outside), and like shell globbing a wildcard does not match a name starting with
`.` unless the pattern's part does (`.git/`, `.venv/` stay out of `**/*.py`).

Glob patterns are matched part by part, with the set of pattern positions a path can have
reached (a Thompson-style simulation): `**` costs at most one more position per part, so a
pattern of many `**` takes time linear in its length for each name, never the exponential
backtracking of a recursive matcher. The walk descends only into folders the pattern can
still match. Grep's patterns are RE2 (google-re2): matching takes linear time.

Every call is bounded: entries examined (`MAX_WALK_ENTRIES`), results shown, bytes read
per file and per call (`MAX_GREP_FILE_BYTES`, `MAX_GREP_TOTAL_BYTES`), and time — the walk
runs in a worker thread that stops when the call is cancelled (its timeout included).
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from awf_nb.tools.args import GlobArgs, GrepArgs, parse, spec
from awf_nb.tools.output import ToolError
from awf_nb.tools.paths import Workspace, is_regular

MAX_GLOB_RESULTS = 1000
MAX_GREP_LINES = 1000
MAX_LINE_CHARS = 500  # of a matching line shown (minified files have megabyte lines)
MAX_WALK_ENTRIES = 200_000  # files and folders looked at by one Glob or Grep
MAX_GREP_FILE_BYTES = 32 * 1024 * 1024  # searched of one file
MAX_GREP_TOTAL_BYTES = 512 * 1024 * 1024  # searched by one call
MAX_PATTERN_CHARS = 1000
_LINE_READ_LIMIT = 1024 * 1024  # a longer "line" is read in pieces
_BINARY_PROBE = 8192

GLOB_SPEC = spec(
    "Glob",
    "Find files and folders by glob pattern (`*`, `?`, `[abc]`, `**` for any depth), "
    "relative to the working directory or to `cwd`. Folders end with `/`.",
    GlobArgs,
)

GREP_SPEC = spec(
    "Grep",
    "Search file contents with a regular expression (RE2 syntax). output_mode: content "
    "(default: path:line:text), files_with_matches, or count.",
    GrepArgs,
)


# --- glob patterns -----------------------------------------------------------------------------


def _pattern_parts(pattern: str, what: str) -> tuple[str, ...]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"{what} is longer than {MAX_PATTERN_CHARS} characters")
    if pattern.startswith("/") or os.path.isabs(pattern):
        raise ToolError(f"{what} must be relative to the working directory")
    parts = tuple(part for part in pattern.split("/") if part not in ("", "."))
    if ".." in parts:
        raise ToolError(f"{what} must not contain '..': paths outside the workspace are refused")
    if not parts:
        raise ToolError(f"{what} must not be empty")
    # `**/**` matches what `**` does: one is enough (and keeps the position sets small).
    merged: list[str] = []
    for part in parts:
        if not (part == "**" and merged and merged[-1] == "**"):
            merged.append(part)
    return tuple(merged)


@lru_cache(maxsize=512)
def _part_regex(part: str) -> re.Pattern[str]:
    # fnmatch's translation: since Python 3.9 it matches in polynomial time (no nested
    # backtracking between stars), and a name is at most a few hundred characters.
    return re.compile(fnmatch.translate(part))


class GlobPattern:
    """A glob over `/`-separated relative paths, matched part by part in linear time."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.parts = parts
        self._size = len(parts)

    def start(self) -> frozenset[int]:
        return self._closure({0})

    def _closure(self, states: set[int] | frozenset[int]) -> frozenset[int]:
        """`states` plus the positions reachable by `**` matching no part."""
        found = set(states)
        for index in sorted(states):
            while index < self._size and self.parts[index] == "**":
                index += 1
                found.add(index)
        return frozenset(found)

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        """The positions reached after the path part `name`."""
        hidden = name.startswith(".")
        reached: set[int] = set()
        for index in states:
            if index >= self._size:
                continue
            part = self.parts[index]
            if part == "**":
                if not hidden:  # `**` does not descend into hidden folders
                    reached.add(index)
            elif (not hidden or part.startswith(".")) and _part_regex(part).match(name):
                reached.add(index + 1)
        return self._closure(reached) if reached else frozenset()

    def accepts(self, states: frozenset[int]) -> bool:
        return self._size in states

    def can_continue(self, states: frozenset[int]) -> bool:
        """Whether a path with these positions could still match once longer."""
        return any(index < self._size for index in states)

    def matches(self, parts: tuple[str, ...] | list[str]) -> bool:
        states = self.start()
        for name in parts:
            states = self.step(states, name)
            if not states:
                return False
        return self.accepts(states)


def path_matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether the path `parts` matches the glob `pattern` (`**`: any number of parts)."""
    return GlobPattern(pattern).matches(parts)


@dataclass
class _Walk:
    """What one walk has looked at, against `MAX_WALK_ENTRIES`."""

    stop: threading.Event
    entries: int = 0
    cut: bool = False
    errors: list[str] = field(default_factory=list)

    def count(self, entries: int) -> bool:
        """Count `entries` more; False once the walk must stop (limit or cancelled)."""
        self.entries += entries
        if self.entries > MAX_WALK_ENTRIES:
            self.cut = True
        return not (self.cut or self.stop.is_set())

    def note(self) -> str:
        if not self.cut:
            return ""
        return (
            f"\n[stopped after looking at {MAX_WALK_ENTRIES} files and folders: narrow the "
            "pattern, path or cwd]"
        )


def _scan(folder: str) -> tuple[list[str], list[str]]:
    """The sorted sub-folders and files of `folder`; symlinks are files here (a symlinked
    folder is not entered), so the walk stays where it started."""
    dirs: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(entry.name)
    except OSError:
        return [], []
    dirs.sort()
    files.sort()
    return dirs, files


def _walk_matching(
    base: str, pattern: GlobPattern, walk: _Walk
) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(relative parts, is a folder) of every entry under `base` the pattern matches, in
    folder order; only folders the pattern can still match are entered."""
    pending: list[tuple[str, tuple[str, ...], frozenset[int]]] = [(base, (), pattern.start())]
    while pending:
        folder, relative, states = pending.pop()
        dirs, files = _scan(folder)
        if not walk.count(len(dirs) + len(files)):
            return
        deeper = []
        for name in dirs:
            reached = pattern.step(states, name)
            if not reached:
                continue
            if pattern.accepts(reached):
                yield (*relative, name), True
            if pattern.can_continue(reached):
                deeper.append((os.path.join(folder, name), (*relative, name), reached))
        for name in files:
            if pattern.accepts(pattern.step(states, name)):
                yield (*relative, name), False
        pending.extend(reversed(deeper))  # depth first, in name order


# --- Glob ----------------------------------------------------------------------------------------


async def glob_tool(workspace: Workspace, arguments: dict[str, Any]) -> str:
    args = parse(GlobArgs, arguments)
    pattern = GlobPattern(_pattern_parts(args.pattern, "pattern"))
    base = workspace.resolve(args.cwd or ".", what="cwd")
    if not base.is_dir():
        raise ToolError(f"cwd {args.cwd} is not a folder")
    return await in_thread(_glob, workspace, base, pattern)


def _glob(stop: threading.Event, workspace: Workspace, base: Path, pattern: GlobPattern) -> str:
    walk = _Walk(stop)
    found: list[str] = []
    total = 0
    for relative, is_dir in _walk_matching(str(base), pattern, walk):
        total += 1
        if len(found) < MAX_GLOB_RESULTS:
            found.append(workspace.show(base.joinpath(*relative)) + ("/" if is_dir else ""))
    if not found:
        return "(no matches)" + walk.note()
    found.sort()
    if total > len(found):
        found.append(f"[{total - len(found)} more not shown: narrow the pattern]")
    return "\n".join(found) + walk.note()


# --- Grep ----------------------------------------------------------------------------------------


def _compile(pattern: str, case_insensitive: bool) -> Any:
    import re2

    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"pattern is longer than {MAX_PATTERN_CHARS} characters")
    options = re2.Options()
    options.log_errors = False  # the error becomes the result, not a line on stderr
    options.case_sensitive = not case_insensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(f"invalid pattern {pattern!r}: {detail}") from None


async def grep_tool(workspace: Workspace, arguments: dict[str, Any]) -> str:
    args = parse(GrepArgs, arguments)
    regex = _compile(args.pattern, args.case_insensitive)
    target = workspace.resolve(args.path or ".")
    if not target.exists():
        raise ToolError(f"{workspace.show(target)} does not exist")
    glob = _pattern_parts(args.glob, "glob") if args.glob else None
    return await in_thread(_grep, workspace, target, regex, args.output_mode, glob)


@dataclass
class _Budget:
    """Bytes Grep may still read in this call."""

    left: int = MAX_GREP_TOTAL_BYTES
    cut_files: list[str] = field(default_factory=list)
    spent: bool = False


def _grep(
    stop: threading.Event,
    workspace: Workspace,
    target: Path,
    regex: Any,
    mode: str,
    glob: tuple[str, ...] | None,
) -> str:
    lines: list[str] = []
    files: list[str] = []
    count = 0
    walk = _Walk(stop)
    budget = _Budget()
    for path in _grep_files(walk, target, glob):
        if budget.spent or stop.is_set():
            break
        shown = workspace.show(path)
        matched = 0
        for number, line in _text_lines(path, workspace, stop, budget, shown):
            if regex.search(line) is None:
                continue
            matched += 1
            if mode == "content" and len(lines) < MAX_GREP_LINES:
                text = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
                lines.append(f"{shown}:{number}:{text}")
            if mode == "files_with_matches" or (mode == "content" and len(lines) >= MAX_GREP_LINES):
                break
        if matched:
            count += matched
            files.append(shown)
        if mode == "content" and len(lines) >= MAX_GREP_LINES:
            lines.append(
                f"[stopped after {MAX_GREP_LINES} matching lines: narrow the pattern, path or glob]"
            )
            break
    notes = walk.note() + _budget_note(budget)
    if mode == "count":
        return f"{count} matching lines in {len(files)} files" + notes
    shown_lines = files if mode == "files_with_matches" else lines
    return ("\n".join(shown_lines) if shown_lines else "(no matches)") + notes


def _budget_note(budget: _Budget) -> str:
    notes = ""
    if budget.cut_files:
        mib = MAX_GREP_FILE_BYTES // (1024 * 1024)
        names = ", ".join(budget.cut_files[:5]) + (" …" if len(budget.cut_files) > 5 else "")
        notes += f"\n[only the first {mib} MiB of each file is searched; cut short: {names}]"
    if budget.spent:
        mib = MAX_GREP_TOTAL_BYTES // (1024 * 1024)
        notes += f"\n[stopped after reading {mib} MiB: narrow the path or glob]"
    return notes


def _grep_files(walk: _Walk, target: Path, glob: tuple[str, ...] | None) -> Iterator[Path]:
    if target.is_file():
        yield target
        return
    base = str(target)
    if glob is not None and (len(glob) > 1 or "**" in glob):
        # A path filter (`src/**/*.py`): the walk enters only folders it can match.
        for relative, is_dir in _walk_matching(base, GlobPattern(glob), walk):
            if not is_dir:
                yield target.joinpath(*relative)
        return
    # A name filter (`*.py`) matches a file's name at any depth, as in ripgrep; without
    # one, every file is searched (hidden files too, but not hidden folders).
    name = GlobPattern(glob) if glob is not None else None
    pending = [base]
    while pending:
        folder = pending.pop()
        dirs, files = _scan(folder)
        if not walk.count(len(dirs) + len(files)):
            return
        for file in files:
            if name is None or name.matches((file,)):
                yield Path(folder, file)
        pending.extend(os.path.join(folder, d) for d in reversed(dirs) if not d.startswith("."))


def _text_lines(
    path: Path, workspace: Workspace, stop: threading.Event, budget: _Budget, shown: str
) -> Iterator[tuple[int, str]]:
    """(1-based number, text) of each line; nothing for binary, unreadable or special
    files, or a symlink leading out of the workspace. At most MAX_GREP_FILE_BYTES of the
    file, and no more than is left of the call's budget."""
    try:
        fd = workspace.open_inside(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ToolError):
        return
    try:
        if not is_regular(fd):  # a FIFO or a device: its read could block or never end
            os.close(fd)
            return
        handle = open(fd, "rb")  # noqa: SIM115 - closed below
    except OSError:
        os.close(fd)
        return
    read = number = 0
    limit = min(MAX_GREP_FILE_BYTES, budget.left)
    with handle:
        try:
            if b"\0" in handle.read(_BINARY_PROBE):
                return
            handle.seek(0)
            while read < limit and not stop.is_set():
                raw = handle.readline(min(_LINE_READ_LIMIT, limit - read))
                if not raw:
                    break
                read += len(raw)
                number += 1
                yield number, raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if read >= limit and handle.read(1):
                if limit == MAX_GREP_FILE_BYTES:
                    budget.cut_files.append(shown)
                else:
                    budget.spent = True
        except OSError:
            return
        finally:
            budget.left -= read
            if budget.left <= 0:
                budget.spent = True


# --- running in a worker thread ----------------------------------------------------------------


async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Run `function(stop, *args)` in a thread; cancelling the call sets `stop`, which the
    function checks as it goes (the thread itself cannot be interrupted)."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(function, stop, *args)
    finally:
        stop.set()
