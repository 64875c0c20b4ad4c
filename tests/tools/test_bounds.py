"""The built-ins cannot hang, flood or escape: `**` patterns match in polynomial time, Read
and Grep stop at their byte limits on huge or sparse files, every call has a time bound,
a file swapped for a symlink after the path check is refused, Write respects the umask,
and nothing a Bash call starts outlives it."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from awf_nb.tools import StepToolSet
from awf_nb.tools.builtins import MAX_READ_SCAN_BYTES, _atomic_write, _open_regular
from awf_nb.tools.output import ToolError
from awf_nb.tools.paths import Workspace
from awf_nb.tools.search import MAX_GREP_FILE_BYTES, GlobPattern
from tests.support.processes import process_alive

Make = Callable[..., StepToolSet]
# A hang guard, not a speed check: before, these calls ran for hours.
HANG = 60.0


def deep_tree(root: Path, depth: int) -> Path:
    folder = root
    for level in range(depth):
        folder = folder / f"d{level}"
    folder.mkdir(parents=True)
    (folder / "leaf.txt").write_text("x\n")
    return folder


async def test_many_double_stars_match_in_polynomial_time(toolset: Make, work: Path) -> None:
    deep_tree(work, 24)
    pattern = "/".join(["**"] * 14 + ["*.py"])  # matches nothing: every split is tried
    tools = toolset(builtin=["Glob"])
    result = await asyncio.wait_for(tools.call("Glob", {"pattern": pattern}), HANG)
    assert result.text == "(no matches)"
    found = await tools.call("Glob", {"pattern": "/".join(["**", "d3", "**"] * 5 + ["*.txt"])})
    assert found.text == "(no matches)"
    leaf = await tools.call("Glob", {"pattern": "**/d23/**/leaf.txt"})
    assert leaf.text.endswith("d23/leaf.txt")


def test_the_glob_matcher_keeps_shell_rules() -> None:
    def matches(pattern: str, path: str) -> bool:
        return GlobPattern(tuple(pattern.split("/"))).matches(tuple(path.split("/")))

    assert matches("**/*.py", "a.py")
    assert matches("**/*.py", "src/deep/a.py")
    assert not matches("**/*.py", ".venv/lib/a.py")  # ** does not enter hidden folders
    assert matches(".venv/**/*.py", ".venv/lib/a.py")
    assert not matches("*", ".env")
    assert matches(".*", ".env")
    assert matches("src/**", "src")
    assert matches("a/**/b/**/c", "a/x/b/y/z/c")
    assert not matches("a/**/b/**/c", "a/x/c")
    assert matches("[ab]?.txt", "b1.txt")


async def test_read_does_not_scan_a_huge_sparse_file(toolset: Make, work: Path) -> None:
    sparse = work / "sparse.log"
    with sparse.open("wb") as handle:
        handle.write(b"first\nsecond\n")
        handle.truncate(64 * 1024**3)  # 64 GiB, nearly all of it a hole
    tools = toolset(builtin=["Read"])
    result = await asyncio.wait_for(tools.call("Read", {"path": "sparse.log", "offset": 5}), HANG)
    assert result.is_error
    assert f"not within the first {MAX_READ_SCAN_BYTES // 2**20} MiB" in result.text
    first = await tools.call("Read", {"path": "sparse.log", "limit": 2})
    assert first.text == "first\nsecond\n"


async def test_grep_reads_a_bounded_part_of_a_huge_file(toolset: Make, work: Path) -> None:
    huge = work / "huge.txt"
    with huge.open("wb") as handle:
        handle.write(b"needle\n" + b"hay\n" * 4096)  # text first: not taken for binary
        handle.truncate(64 * 1024**3)
    tools = toolset(builtin=["Grep"])
    call = tools.call("Grep", {"pattern": "needle", "output_mode": "count"})
    result = await asyncio.wait_for(call, HANG)
    assert result.text.startswith("1 matching lines in 1 files")
    assert f"only the first {MAX_GREP_FILE_BYTES // 2**20} MiB of each file" in result.text
    assert "huge.txt" in result.text


async def test_a_file_tool_call_is_stopped_at_tools_timeout(
    toolset: Make, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.tools import search

    stopped = threading.Event()

    def slow_walk(stop: threading.Event, *args: object) -> str:
        stop.wait(HANG)  # a walk of a huge tree; it checks `stop` as it goes
        stopped.set()
        return "late"

    monkeypatch.setattr(search, "_glob", slow_walk)
    tools = toolset(builtin=["Glob"], timeout="0.5s")
    result = await asyncio.wait_for(tools.call("Glob", {"pattern": "**"}), HANG)
    assert result.is_error
    assert result.text == "Glob: stopped after 0.5 s (tools.timeout): narrow the request"
    assert await asyncio.to_thread(stopped.wait, HANG)  # the worker thread was told to stop


def test_a_symlink_swapped_in_after_the_check_is_refused(work: Path, tmp_path: Path) -> None:
    workspace = Workspace(work)
    (work / "notes.txt").write_text("inside\n")
    checked = workspace.real("notes.txt")
    # A command replaces the file by a link leading out, after the path was checked.
    os.unlink(checked)
    os.symlink(tmp_path / "outside" / "secret.txt", checked)
    with pytest.raises(ToolError, match="now leads outside the working directory"):
        _open_regular(checked, workspace)


def test_a_folder_swapped_for_a_symlink_cannot_take_a_write_outside(
    work: Path, tmp_path: Path
) -> None:
    workspace = Workspace(work)
    (work / "sub").mkdir()
    target = workspace.resolve("sub/new.txt")
    (work / "sub").rmdir()
    os.symlink(tmp_path / "outside", work / "sub")
    with pytest.raises(ToolError, match="leads outside"):
        _atomic_write(target, b"data", workspace)
    assert not (tmp_path / "outside" / "new.txt").exists()


async def test_racing_symlink_swaps_never_let_read_see_outside(toolset: Make, work: Path) -> None:
    """The attack as it was made: Reads while a thread swaps a file and a link to the
    outside (before, 32 of 3,000 Reads returned the outside file)."""
    (work / "real.txt").write_text("inside data\n")
    outside = work.parent / "outside" / "secret.txt"
    stop = threading.Event()

    def swap() -> None:
        path = work / "swap.txt"
        while not stop.is_set():
            for make in (
                lambda: path.write_text("inside data\n"),
                lambda: path.symlink_to(outside),
            ):
                path.unlink(missing_ok=True)
                make()

    swapper = threading.Thread(target=swap)
    swapper.start()
    tools = toolset(builtin=["Read"])
    try:
        texts = [(await tools.call("Read", {"path": "swap.txt"})).text for _ in range(1500)]
    finally:
        stop.set()
        swapper.join()
    assert not [text for text in texts if "outside data" in text]


def test_write_creates_files_as_the_umask_says(work: Path) -> None:
    workspace = Workspace(work)
    old = os.umask(0o077)
    try:
        _atomic_write(workspace.resolve("private.txt"), b"x", workspace)
    finally:
        os.umask(old)
    assert (work / "private.txt").stat().st_mode & 0o777 == 0o600
    (work / "shared.txt").write_text("old")
    (work / "shared.txt").chmod(0o664)
    _atomic_write(workspace.resolve("shared.txt"), b"new", workspace)
    assert (work / "shared.txt").stat().st_mode & 0o777 == 0o664  # an existing file keeps its own


@pytest.mark.parametrize(
    "launch",
    [
        "sleep 300 > /dev/null 2>&1 &",
        "nohup sleep 300 > /dev/null 2>&1 &",
        "setsid sleep 300 > /dev/null 2>&1 < /dev/null &",
        "setsid sh -c 'sleep 300 & echo $! > {pids}.2; exec sleep 301' > /dev/null 2>&1 < /dev/null &",
    ],
)
async def test_nothing_a_bash_call_starts_outlives_it(
    toolset: Make, tmp_path: Path, launch: str
) -> None:
    pids = tmp_path / "pids"
    command = launch.format(pids=pids) + f" echo $! > {pids}"
    tools = toolset(builtin=["Bash"])
    result = await tools.call("Bash", {"command": command})
    assert not result.is_error, result.text
    started = [int(pids.read_text())]
    if Path(f"{pids}.2").exists():
        started.append(int(Path(f"{pids}.2").read_text()))
    assert started and not [pid for pid in started if process_alive(pid)]
