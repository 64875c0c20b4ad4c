"""The built-in tools Read, Write, Edit and Bash: confinement, limits, semantics, stopping."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
from pathlib import Path

import pytest

from awf_nb.engine.ports import ToolResult
from awf_nb.secrets import Masker
from awf_nb.tools.builtins import (
    INLINE_READ_BYTES,
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    BuiltinTools,
    _read_lines,
)
from tests.support.mcp_peer import SECRET
from tests.support.processes import process_alive
from tests.support.waiting import until

ALL = ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]


@pytest.fixture
def tools(work: Path, masker: Masker) -> BuiltinTools:
    return BuiltinTools(ALL, cwd=work, env=dict(os.environ), masker=masker)


async def call(tools: BuiltinTools, name: str, **arguments: object) -> ToolResult:
    return await tools.call(name, dict(arguments))


# --- staying inside the working directory -------------------------------------------------------


async def test_read_refuses_a_parent_path(tools: BuiltinTools) -> None:
    result = await call(tools, "Read", path="../outside/secret.txt")
    assert result.is_error
    assert "outside the working directory" in result.text
    assert "outside data" not in result.text


async def test_read_refuses_a_parent_path_hidden_in_the_middle(tools: BuiltinTools) -> None:
    result = await call(tools, "Read", path="sub/../../outside/secret.txt")
    assert result.is_error and "outside the working directory" in result.text


async def test_read_refuses_an_absolute_path_outside(tools: BuiltinTools, work: Path) -> None:
    result = await call(tools, "Read", path=str(work.parent / "outside" / "secret.txt"))
    assert result.is_error and "outside the working directory" in result.text


async def test_read_accepts_an_absolute_path_inside(tools: BuiltinTools, work: Path) -> None:
    (work / "a.txt").write_text("inside\n")
    result = await call(tools, "Read", path=str(work / "a.txt"))
    assert result == ToolResult("inside\n")


async def test_read_refuses_a_symlink_pointing_outside(tools: BuiltinTools, work: Path) -> None:
    (work / "link.txt").symlink_to(work.parent / "outside" / "secret.txt")
    result = await call(tools, "Read", path="link.txt")
    assert result.is_error and "outside the working directory" in result.text
    assert "outside data" not in result.text


async def test_write_through_a_symlinked_folder_pointing_outside_is_refused(
    tools: BuiltinTools, work: Path
) -> None:
    (work / "out").symlink_to(work.parent / "outside", target_is_directory=True)
    result = await call(tools, "Write", path="out/new.txt", content="x")
    assert result.is_error and "outside the working directory" in result.text
    assert not (work.parent / "outside" / "new.txt").exists()


async def test_edit_refuses_a_path_outside(tools: BuiltinTools, work: Path) -> None:
    result = await call(tools, "Edit", path="../outside/secret.txt", old="outside", new="x")
    assert result.is_error
    assert (work.parent / "outside" / "secret.txt").read_text() == "outside data\n"


async def test_a_symlink_inside_the_working_directory_is_followed(
    tools: BuiltinTools, work: Path
) -> None:
    (work / "real.txt").write_text("real\n")
    (work / "alias.txt").symlink_to(work / "real.txt")
    assert await call(tools, "Read", path="alias.txt") == ToolResult("real\n")


async def test_a_symlink_loop_is_an_error_result(tools: BuiltinTools, work: Path) -> None:
    (work / "a.txt").symlink_to(work / "b.txt")
    (work / "b.txt").symlink_to(work / "a.txt")
    for name in ("Read", "Edit"):
        result = await call(tools, name, path="a.txt", old="x", new="y")
        assert result.is_error and "a.txt" in result.text
        assert re.search("symlink loop|too many levels of symbolic links", result.text, re.I)


# --- Read ----------------------------------------------------------------------------------------


async def test_read_offset_is_a_zero_based_line_and_limit_a_line_count(
    tools: BuiltinTools, work: Path
) -> None:
    (work / "lines.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    result = await call(tools, "Read", path="lines.txt", offset=3, limit=2)
    assert result == ToolResult("line 3\nline 4\n")


async def test_read_past_the_end_says_so(tools: BuiltinTools, work: Path) -> None:
    (work / "short.txt").write_text("one\n")
    result = await call(tools, "Read", path="short.txt", offset=5)
    assert not result.is_error and "shorter" in result.text


async def test_read_stops_at_5_mib_and_says_where_to_continue(
    tools: BuiltinTools, work: Path
) -> None:
    line = "x" * 99 + "\n"  # 100 bytes
    count = (6 * 1024 * 1024) // len(line)
    (work / "big.txt").write_text(line * count)
    first = await call(tools, "Read", path="big.txt")
    body, _, note = first.text.rpartition("\n[")
    assert len(body.encode()) <= MAX_READ_BYTES
    shown = body.count("\n")
    assert f"continue with offset={shown}" in note
    rest = await call(tools, "Read", path="big.txt", offset=shown)
    assert rest.text.count("\n") == count - shown


async def test_read_of_one_huge_line_is_capped_at_5_mib(tools: BuiltinTools, work: Path) -> None:
    (work / "one-line.txt").write_bytes(b"y" * (6 * 1024 * 1024))
    result = await call(tools, "Read", path="one-line.txt")
    body, _, note = result.text.partition("\n[")
    assert body == "y" * MAX_READ_BYTES
    assert "longer than 5 MiB" in note


async def test_a_small_file_is_read_without_a_thread_and_a_large_one_in_a_thread(
    tools: BuiltinTools, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[str] = []
    to_thread = asyncio.to_thread

    async def counting(function: object, *args: object) -> object:
        handed.append(getattr(function, "__name__", ""))
        return await to_thread(function, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "to_thread", counting)
    (work / "small.txt").write_text("a line\n" * 100)
    (work / "large.txt").write_text("a line\n" * (INLINE_READ_BYTES // 7 + 1))
    small = await call(tools, "Read", path="small.txt")
    assert small.text == "a line\n" * 100 and handed == []
    large = await call(tools, "Read", path="large.txt", offset=1, limit=2)
    assert large.text == "a line\na line\n" and handed == ["_read_lines"]


def test_a_file_that_grew_after_its_size_was_taken_is_read_whole(work: Path) -> None:
    """Read sizes its buffer by the file's size (not by the 5 MiB cap): more bytes than
    that size are still all read, up to the cap."""
    (work / "growing.txt").write_text("line\n" * 1000)
    with (work / "growing.txt").open("rb") as handle:
        text, note = _read_lines(None, handle, 0, None, size=10)
    assert text == "line\n" * 1000 and note == ""
    (work / "big.txt").write_bytes(b"z" * (MAX_READ_BYTES + 10))
    with (work / "big.txt").open("rb") as handle:
        text, note = _read_lines(None, handle, 0, None, size=10)
    assert text == "z" * MAX_READ_BYTES and "longer than 5 MiB" in note


async def test_a_fifo_that_replaced_a_checked_file_is_refused_not_waited_on(
    tools: BuiltinTools, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is checked is the file opened, not the path looked at before: a FIFO swapped
    in after a look at the path (here: a look that still saw the regular file) would
    block the read until some writer came."""
    (work / "notes.txt").write_text("a note\n")
    looked = (work / "notes.txt").stat()
    (work / "notes.txt").unlink()
    os.mkfifo(work / "notes.txt")
    real_stat = Path.stat
    monkeypatch.setattr(
        Path, "stat", lambda self, **kw: looked if self.name == "notes.txt" else real_stat(self)
    )

    def writer() -> None:  # what ends a read that waits on the FIFO, if one does
        for _ in range(100):
            time.sleep(0.05)
            with contextlib.suppress(OSError):  # ENXIO: nobody has it open for reading
                os.close(os.open(work / "notes.txt", os.O_WRONLY | os.O_NONBLOCK))
                return

    threading.Thread(target=writer, daemon=True).start()
    result = await call(tools, "Read", path="notes.txt")
    assert result.is_error and "not a regular file" in result.text


async def test_read_refuses_what_is_not_a_regular_file(tools: BuiltinTools, work: Path) -> None:
    os.mkfifo(work / "pipe")  # reading it would block forever
    (work / "folder").mkdir()
    pipe = await call(tools, "Read", path="pipe")
    folder = await call(tools, "Read", path="folder")
    assert pipe.is_error and "not a regular file" in pipe.text
    assert folder.is_error and "folder" in folder.text


async def test_read_of_a_missing_file_is_an_error_result(tools: BuiltinTools) -> None:
    result = await call(tools, "Read", path="nope.txt")
    assert result.is_error and "does not exist" in result.text


async def test_read_masks_secrets(tools: BuiltinTools, work: Path) -> None:
    (work / ".env").write_text(f"API={SECRET}\n")
    result = await call(tools, "Read", path=".env")
    assert result == ToolResult("API=***\n")


async def test_a_read_cut_at_the_limit_never_shows_the_start_of_a_secret(
    work: Path, masker: Masker
) -> None:
    # The 5 MiB cut falls inside the secret: its first half must not be shown.
    data = b"z" * (MAX_READ_BYTES - 5) + SECRET.encode()
    (work / "cut.txt").write_bytes(data)
    tools = BuiltinTools(["Read"], cwd=work, env={}, masker=masker)
    result = await call(tools, "Read", path="cut.txt")
    assert SECRET[:5] not in result.text


# --- Write and Edit ----------------------------------------------------------------------------


async def test_write_creates_folders_and_replaces_the_file(tools: BuiltinTools, work: Path) -> None:
    first = await call(tools, "Write", path="a/b/c.txt", content="one")
    second = await call(tools, "Write", path="a/b/c.txt", content="two")
    assert not first.is_error and not second.is_error
    assert (work / "a/b/c.txt").read_text() == "two"
    assert [p.name for p in (work / "a/b").iterdir()] == ["c.txt"]  # no temp file left


async def test_write_keeps_the_file_mode(tools: BuiltinTools, work: Path) -> None:
    script = work / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    await call(tools, "Write", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert script.stat().st_mode & 0o777 == 0o755


async def test_write_refuses_more_than_5_mib(tools: BuiltinTools, work: Path) -> None:
    result = await call(tools, "Write", path="big.txt", content="x" * (MAX_WRITE_BYTES + 1))
    assert result.is_error and "5 MiB" in result.text
    assert not (work / "big.txt").exists()


async def test_edit_replaces_a_unique_match(tools: BuiltinTools, work: Path) -> None:
    (work / "code.py").write_text("a = 1\nb = 2\n")
    result = await call(tools, "Edit", path="code.py", old="b = 2", new="b = 3")
    assert not result.is_error
    assert (work / "code.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_refuses_an_ambiguous_match_without_replace_all(
    tools: BuiltinTools, work: Path
) -> None:
    (work / "code.py").write_text("x = 0\nx = 0\n")
    result = await call(tools, "Edit", path="code.py", old="x = 0", new="x = 1")
    assert result.is_error and "2 times" in result.text
    assert (work / "code.py").read_text() == "x = 0\nx = 0\n"


async def test_edit_refuses_a_file_over_5_mib_and_leaves_it_whole(
    tools: BuiltinTools, work: Path
) -> None:
    big = b"x" * MAX_READ_BYTES + b"tail\n"
    (work / "big.txt").write_bytes(big)
    result = await call(tools, "Edit", path="big.txt", old="tail", new="end")
    assert result.is_error and "larger than 5 MiB" in result.text
    assert (work / "big.txt").read_bytes() == big


async def test_edit_replace_all_replaces_every_match(tools: BuiltinTools, work: Path) -> None:
    (work / "code.py").write_text("x = 0\nx = 0\n")
    result = await call(tools, "Edit", path="code.py", old="x = 0", new="x = 1", replace_all=True)
    assert result == ToolResult("replaced 2 occurrences in code.py")
    assert (work / "code.py").read_text() == "x = 1\nx = 1\n"


async def test_edit_of_text_not_in_the_file_is_an_error(tools: BuiltinTools, work: Path) -> None:
    (work / "code.py").write_text("a\n")
    result = await call(tools, "Edit", path="code.py", old="zzz", new="y")
    assert result.is_error and "not found" in result.text


async def test_claude_code_argument_names_are_accepted(tools: BuiltinTools, work: Path) -> None:
    (work / "n.txt").write_text("old text\n")
    result = await call(tools, "Edit", file_path="n.txt", old_string="old", new_string="new")
    assert not result.is_error
    assert (await call(tools, "Read", file_path="n.txt")).text == "new text\n"


async def test_a_missing_argument_is_an_error_result(tools: BuiltinTools) -> None:
    result = await call(tools, "Edit", path="x.txt", new="y")
    assert result == ToolResult("Edit: missing argument: old", is_error=True)


# --- Bash ----------------------------------------------------------------------------------------


async def test_bash_runs_in_the_working_directory(tools: BuiltinTools, work: Path) -> None:
    result = await call(tools, "Bash", command="pwd")
    assert result == ToolResult(f"{work.resolve()}\n")


async def test_bash_cwd_must_stay_inside(tools: BuiltinTools) -> None:
    result = await call(tools, "Bash", command="ls", cwd="..")
    assert result.is_error and "outside the working directory" in result.text


async def test_bash_non_zero_exit_is_an_error_with_its_output(tools: BuiltinTools) -> None:
    result = await call(tools, "Bash", command="echo out; echo err >&2; exit 4")
    assert result == ToolResult("out\nerr\n[exit code 4]", is_error=True)


async def test_bash_output_is_masked_and_capped(tools: BuiltinTools) -> None:
    result = await call(
        tools, "Bash", command=f"echo {SECRET}; head -c 100000 /dev/zero | tr '\\0' a"
    )
    assert SECRET not in result.text and "***" in result.text
    assert "characters omitted" in result.text
    assert len(result.text) < 31_000


async def test_bash_timeout_stops_the_command_and_its_children(
    tools: BuiltinTools, work: Path
) -> None:
    result = await call(
        tools,
        "Bash",
        command="sleep 60 & echo $! > child.pid; echo $$ > shell.pid; wait",
        timeout_seconds=1,
    )
    assert result.is_error and "timed out after 1 s" in result.text
    for name in ("shell.pid", "child.pid"):
        assert not process_alive(int((work / name).read_text()))


async def test_cancelling_a_bash_call_kills_its_processes(tools: BuiltinTools, work: Path) -> None:
    task = asyncio.create_task(
        call(tools, "Bash", command="sleep 60 & echo $! > child.pid; echo $$ > shell.pid; wait")
    )
    await until(lambda: _pid(work / "shell.pid") and _pid(work / "child.pid"), "both pids")
    shell, child = _pid(work / "shell.pid"), _pid(work / "child.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not process_alive(shell)
    assert not process_alive(child)


async def test_a_tool_not_chosen_is_unknown(work: Path, masker: Masker) -> None:
    tools = BuiltinTools(["Read"], cwd=work, env={}, masker=masker)
    assert [spec.name for spec in tools.list()] == ["Read"]
    result = await call(tools, "Bash", command="echo hi")
    assert result.is_error and "unknown tool" in result.text


def _pid(path: Path) -> int:
    """The pid written in `path`, 0 while it is not (completely) written."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return 0
    return int(text) if text.endswith("\n") else 0
