"""MCP servers as tool sources: a test server written with the SDK, failures to start, and
the real `@modelcontextprotocol/server-filesystem` from npm."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from awf_nb.engine.ports import ToolResult
from awf_nb.errors import ExecutionError
from awf_nb.tools import StepToolSet
from tests.support.mcp_peer import SECRET, notes_server
from tests.support.peers import FILESYSTEM_SERVER, NPM_BIN
from tests.support.processes import process_alive
from tests.support.waiting import until

Make = Callable[..., StepToolSet]


async def test_tools_are_named_server_underscore_tool(toolset: Make) -> None:
    async with toolset(mcp=[notes_server()]) as tools:
        names = [spec.name for spec in tools.list()]
        add = next(spec for spec in tools.list() if spec.name == "notes_add")
    assert names == ["notes_add", "notes_echo", "notes_fail", "notes_environment", "notes_wait"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"]["a"]["type"] == "integer"


async def test_results_and_failures_come_back_as_results(toolset: Make) -> None:
    async with toolset(mcp=[notes_server()]) as tools:
        added = await tools.call("notes_add", {"a": 2, "b": 3})
        failed = await tools.call("notes_fail", {})
        invalid = await tools.call("notes_add", {"a": "two"})
        unknown = await tools.call("notes_nothing", {})
    assert added == ToolResult("5")
    assert failed.is_error
    assert invalid.is_error and "validation error" in invalid.text
    assert unknown.is_error and 'unknown tool "notes_nothing"' in unknown.text


async def test_the_server_gets_the_step_environment_and_its_own(toolset: Make) -> None:
    server = notes_server(env={"NOTES_DB": "notes.db"})
    async with toolset(mcp=[server], env={"STEP_VALUE": "from the step"}) as tools:
        step = await tools.call("notes_environment", {"name": "STEP_VALUE"})
        own = await tools.call("notes_environment", {"name": "NOTES_DB"})
    assert (step.text, own.text) == ("from the step", "notes.db")


async def test_secrets_in_results_are_masked(toolset: Make) -> None:
    async with toolset(mcp=[notes_server()]) as tools:
        result = await tools.call("notes_echo", {"text": f"key={SECRET}"})
    assert result == ToolResult("key=***")


async def test_cancelling_a_call_leaves_the_server_usable(toolset: Make) -> None:
    async with toolset(mcp=[notes_server()]) as tools:
        call = asyncio.create_task(tools.call("notes_wait", {"seconds": 600}))
        await asyncio.sleep(0.2)  # let the request reach the server (no timing is checked)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await tools.call("notes_add", {"a": 1, "b": 1}) == ToolResult("2")


async def test_servers_stop_with_the_tool_set(toolset: Make, tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    async with toolset(mcp=[notes_server("notes", "--pidfile", str(pidfile))]):
        pid = int(pidfile.read_text())
        assert process_alive(pid)
    assert not process_alive(pid)


async def test_a_missing_command_is_an_error_naming_the_server(toolset: Make) -> None:
    tools = toolset(mcp=[{"name": "ghost", "command": "/nonexistent/mcp-server"}])
    with pytest.raises(ExecutionError) as caught:
        await tools.start()
    assert 'MCP server "ghost" failed to start' in str(caught.value)
    assert "command not found: /nonexistent/mcp-server" in str(caught.value)


async def test_a_server_that_exits_at_once_is_an_error_with_its_stderr(toolset: Make) -> None:
    with pytest.raises(ExecutionError) as caught:
        async with toolset(mcp=[notes_server("quitter", "exit")]):
            pass
    message = str(caught.value)
    assert 'MCP server "quitter" failed to start' in message
    assert "cannot open the notes database" in message


async def test_a_server_that_never_answers_is_an_error_and_is_stopped(
    toolset: Make, tmp_path: Path
) -> None:
    pidfile = tmp_path / "mute.pid"
    server = notes_server("mute", "mute", "--pidfile", str(pidfile), startup_timeout=1)
    with pytest.raises(ExecutionError) as caught:
        async with toolset(mcp=[server]):
            pass
    assert 'MCP server "mute" did not answer within 1 s' in str(caught.value)
    await until(pidfile.exists, "the pid file")
    assert not process_alive(int(pidfile.read_text()))


async def test_one_server_failing_stops_the_others(toolset: Make, tmp_path: Path) -> None:
    pidfile = tmp_path / "good.pid"
    good = notes_server("good", "--pidfile", str(pidfile))
    bad = notes_server("bad", "exit")
    with pytest.raises(ExecutionError, match='MCP server "bad"'):
        async with toolset(mcp=[good, bad]):
            pass
    await until(pidfile.exists, "the pid file")
    assert not process_alive(int(pidfile.read_text()))


@pytest.mark.real_cli
async def test_the_npm_filesystem_server_reads_files_through_the_tool_set(
    toolset: Make, work: Path
) -> None:
    if not FILESYSTEM_SERVER.exists():
        pytest.skip(
            f"mcp-server-filesystem not installed in {NPM_BIN} "
            "(tests/providers/cli/install_clis.sh)"
        )
    (work / "notes.txt").write_text("from the filesystem server\n")
    server = {
        "name": "fs",
        "command": str(FILESYSTEM_SERVER),
        "args": [str(work)],
        "startup_timeout": 120,  # a cold Node start on a busy machine
    }
    async with toolset(mcp=[server]) as tools:
        names = {spec.name for spec in tools.list()}
        read = await tools.call("fs_read_text_file", {"path": str(work / "notes.txt")})
        outside = await tools.call("fs_list_directory", {"path": str(work.parent / "outside")})
    assert {"fs_read_text_file", "fs_list_directory", "fs_write_file"} <= names
    assert read == ToolResult("from the filesystem server\n")
    assert outside.is_error


def test_offered_names_are_what_model_apis_accept() -> None:
    from awf_nb.tools.mcp_client import offered_name

    assert offered_name("notes", "add") == "notes_add"
    assert offered_name("fs", "files.read") == "fs_files_read"
    long = offered_name("server", "x" * 100)
    assert len(long) == 64 and re.fullmatch(r"[A-Za-z0-9_-]+", long)
    taken = {"fs_files_read": "files_read"}
    other = offered_name("fs", "files.read", taken=taken)
    assert other != "fs_files_read" and other.startswith("fs_files_read_")
