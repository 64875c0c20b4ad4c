"""The Glob and Grep built-ins: finding files by name and lines by regular expression.

Both walk the working directory without following symlinked folders (a link cannot lead
the walk outside), and like shell globbing a wildcard does not match a name starting with
`.` unless the pattern's part does (`.git/`, `.venv/` stay out of `**/*.py`).
Grep's patterns are RE2 (google-re2, as input validation uses): matching takes linear
time, so a model's pattern cannot hang the step on backtracking. The walk runs in a worker
thread that stops when the call is cancelled.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from awf_nb.engine.ports import ToolSpec
from awf_nb.tools.args import optional_string, string, truthy
from awf_nb.tools.output import ToolError
from awf_nb.tools.paths import Workspace

MAX_GLOB_RESULTS = 1000
MAX_GREP_LINES = 1000
MAX_LINE_CHARS = 500  # of a matching line shown (minified files have megabyte lines)
_LINE_READ_LIMIT = 1024 * 1024  # a longer "line" is read in pieces
_BINARY_PROBE = 8192

GLOB_SPEC = ToolSpec(
    "Glob",
    "Find files and folders by glob pattern (`*`, `?`, `[abc]`, `**` for any depth), "
    "relative to the working directory or to `cwd`. Folders end with `/`.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "e.g. **/*.py or src/*.md"},
            "cwd": {"type": "string", "description": "folder to search from (relative)"},
        },
        "required": ["pattern"],
    },
)

GREP_SPEC = ToolSpec(
    "Grep",
    "Search file contents with a regular expression (RE2 syntax). output_mode: content "
    "(default: path:line:text), files_with_matches, or count.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "file or folder to search (relative)"},
            "glob": {"type": "string", "description": "only files matching, e.g. *.py"},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
            },
            "case_insensitive": {"type": "boolean"},
        },
        "required": ["pattern"],
    },
)

_OUTPUT_MODES = ("content", "files_with_matches", "count")


# --- glob patterns -----------------------------------------------------------------------------


def _pattern_parts(pattern: str, what: str) -> tuple[str, ...]:
    if pattern.startswith("/") or os.path.isabs(pattern):
        raise ToolError(f"{what} must be relative to the working directory")
    parts = tuple(part for part in pattern.split("/") if part not in ("", "."))
    if ".." in parts:
        raise ToolError(f"{what} must not contain '..': paths outside the workspace are refused")
    if not parts:
        raise ToolError(f"{what} must not be empty")
    return parts


def _part_matches(name: str, pattern: str) -> bool:
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, pattern)


def path_matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether the path `parts` matches the glob `pattern` (`**`: any number of parts)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        for skip in range(len(parts) + 1):
            if path_matches(parts[skip:], rest):
                return True
            if skip < len(parts) and parts[skip].startswith("."):
                return False  # `**` does not descend into hidden folders
        return False
    return bool(parts) and _part_matches(parts[0], head) and path_matches(parts[1:], rest)


def _walk(
    top: Path, stop: threading.Event, *, hidden: bool, depth: int | None
) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk without following symlinked folders, pruned by depth and hidden folders."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        if stop.is_set():
            return
        here = Path(folder)
        level = len(here.relative_to(top).parts)
        if not hidden:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
        if depth is not None and level + 1 >= depth:
            yield here, dirs[:], files
            dirs[:] = []
            continue
        dirs.sort()
        yield here, dirs, files


# --- Glob ----------------------------------------------------------------------------------------


async def glob_tool(workspace: Workspace, args: dict[str, Any]) -> str:
    pattern = _pattern_parts(string(args, "pattern"), "pattern")
    folder = optional_string(args, "cwd") or optional_string(args, "path")
    base = workspace.resolve(folder or ".", what="cwd")
    if not base.is_dir():
        raise ToolError(f"cwd {folder} is not a folder")
    return await _in_thread(_glob, workspace, base, pattern)


def _glob(stop: threading.Event, workspace: Workspace, base: Path, pattern: tuple[str, ...]) -> str:
    depth = None if "**" in pattern else len(pattern)
    hidden = any(part.startswith(".") for part in pattern)
    found: list[str] = []
    total = 0
    for folder, dirs, files in _walk(base, stop, hidden=hidden, depth=depth):
        relative = folder.relative_to(base).parts
        for name, suffix in [*((d, "/") for d in dirs), *((f, "") for f in files)]:
            if path_matches((*relative, name), pattern):
                total += 1
                if len(found) < MAX_GLOB_RESULTS:
                    found.append(workspace.show(folder / name) + suffix)
    if not found:
        return "(no matches)"
    found.sort()
    if total > len(found):
        found.append(f"[{total - len(found)} more not shown: narrow the pattern]")
    return "\n".join(found)


# --- Grep ----------------------------------------------------------------------------------------


def _compile(pattern: str, case_insensitive: bool) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # the error becomes the result, not a line on stderr
    options.case_sensitive = not case_insensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(f"invalid pattern {pattern!r}: {detail}") from None


async def grep_tool(workspace: Workspace, args: dict[str, Any]) -> str:
    regex = _compile(string(args, "pattern"), truthy(args, "case_insensitive"))
    mode = optional_string(args, "output_mode") or "content"
    if mode not in _OUTPUT_MODES:
        raise ToolError(f"output_mode must be one of: {', '.join(_OUTPUT_MODES)}")
    target = workspace.resolve(optional_string(args, "path") or ".")
    if not target.exists():
        raise ToolError(f"{workspace.show(target)} does not exist")
    name_filter = optional_string(args, "glob")
    glob = _pattern_parts(name_filter, "glob") if name_filter else None
    return await _in_thread(_grep, workspace, target, regex, mode, glob)


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
    for path in _grep_files(stop, workspace, target, glob):
        shown = workspace.show(path)
        matched = 0
        for number, line in _text_lines(path):
            if regex.search(line) is None:
                continue
            matched += 1
            if mode == "content" and len(lines) < MAX_GREP_LINES:
                text = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
                lines.append(f"{shown}:{number}:{text}")
            if mode == "files_with_matches":
                break
        if matched:
            count += matched
            files.append(shown)
        if mode == "content" and len(lines) >= MAX_GREP_LINES:
            lines.append(
                f"[stopped after {MAX_GREP_LINES} matching lines: narrow the pattern, path or glob]"
            )
            break
    if mode == "count":
        return f"{count} matching lines in {len(files)} files"
    shown_lines = files if mode == "files_with_matches" else lines
    return "\n".join(shown_lines) if shown_lines else "(no matches)"


def _grep_files(
    stop: threading.Event, workspace: Workspace, target: Path, glob: tuple[str, ...] | None
) -> Iterator[Path]:
    if target.is_file():
        yield target
        return
    for folder, _dirs, files in _walk(target, stop, hidden=False, depth=None):
        for name in sorted(files):
            if stop.is_set():
                return
            path = folder / name
            if glob is not None:
                relative = path.relative_to(target).parts
                parts = relative if len(glob) > 1 or "**" in glob else (name,)
                if not path_matches(parts, glob):
                    continue
            if path.is_symlink():
                try:
                    real = path.resolve()
                except (OSError, RuntimeError):
                    continue
                if not workspace.contains(real):
                    continue  # a link pointing outside the workspace
            if path.is_file():
                yield path


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based number, text) of each line; nothing for binary or unreadable files."""
    try:
        with path.open("rb") as handle:
            if b"\0" in handle.read(_BINARY_PROBE):
                return
            handle.seek(0)
            number = 0
            while True:
                raw = handle.readline(_LINE_READ_LIMIT)
                if not raw:
                    return
                number += 1
                yield number, raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
    except OSError:
        return


# --- running in a worker thread ----------------------------------------------------------------


async def _in_thread(function: Any, *args: Any) -> str:
    """Run `function(stop, *args)` in a thread; cancelling the call sets `stop`."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(function, stop, *args)
    finally:
        stop.set()
