"""`awf mcp-serve` as a real subprocess, driven by the MCP SDK's own client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from awf_nb.errors import UserError
from awf_nb.tools.serve import load_serve_config, run_server
from tests.support.cli import run_awf
from tests.support.mcp_peer import SECRET, notes_server
from tests.support.processes import process_alive
from tests.support.waiting import until, wait_until

REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


@asynccontextmanager
async def awf_mcp_serve(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "awf_nb.cli", "mcp-serve", *args],
        env=env or _env(),
        cwd=cwd,
    )
    with (cwd.parent / "mcp-serve.stderr").open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def _text(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


def _config(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(data))
    return str(path)


async def test_mcp_serve_lists_and_calls_builtin_and_command_tools(
    work: Path, tmp_path: Path
) -> None:
    (work / "hello.txt").write_text("hello from the workspace\n")
    config = _config(
        tmp_path,
        {
            "root_dir": str(work),
            "builtin": ["Read", "Glob"],
            "commands": [
                {
                    "name": "greet",
                    "description": "greet someone",
                    "parameters": {"who": {"type": "string"}},
                    "command": 'echo "hello $who from $PROJECT"',
                },
                {"name": "wipe", "description": "dangerous", "command": "echo wiped"},
            ],
            "confirm": ["wipe"],
            "env": {"PROJECT": "demo"},
        },
    )
    async with awf_mcp_serve("--config", config, cwd=tmp_path) as session:
        listing = await session.list_tools()
        read = await session.call_tool("Read", {"path": "hello.txt"})
        outside = await session.call_tool("Read", {"path": "../tools.json"})
        greet = await session.call_tool("greet", {"who": "$(touch pwned)"})
        wipe = await session.call_tool("wipe", {})
    assert [tool.name for tool in listing.tools] == ["Read", "Glob", "greet", "wipe"]
    greet_tool = listing.tools[2]
    assert greet_tool.input_schema["properties"] == {"who": {"type": "string"}}
    assert (_text(read), read.is_error) == ("hello from the workspace\n", False)
    assert outside.is_error and "outside the working directory" in _text(outside)
    assert _text(greet) == "hello $(touch pwned) from demo\n"
    assert not (work / "pwned").exists()
    assert wipe.is_error and "--yes" in _text(wipe)


async def test_mcp_serve_proxies_an_mcp_server_and_masks_secrets(
    work: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "notes.pid"
    server = notes_server("notes", "--pidfile", str(pidfile))
    config = _config(tmp_path, {"mcp": [server], "confirm": ["notes"]})
    env = _env(NOTES_API_TOKEN=SECRET)
    async with awf_mcp_serve("--config", config, "--yes", cwd=work, env=env) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        added = await session.call_tool("notes_add", {"a": 20, "b": 22})
        token = await session.call_tool("notes_environment", {"name": "NOTES_API_TOKEN"})
    assert "notes_add" in names
    assert _text(added) == "42"
    assert _text(token) == "***"
    # The client closed awf's stdin: awf stopped the server it proxied.
    await until(lambda: not process_alive(int(pidfile.read_text())), "the proxied server to stop")


async def test_mcp_serve_builtin_flag_serves_all_six(work: Path) -> None:
    async with awf_mcp_serve("--builtin", "all", cwd=work) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        bash = await session.call_tool("Bash", {"command": "pwd"})
    assert names == ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]
    assert _text(bash) == f"{work}\n"


def test_mcp_serve_with_nothing_to_serve_is_a_user_error(work: Path) -> None:
    done = run_awf("mcp-serve", cwd=work)
    assert done.returncode == 1
    assert "nothing to serve" in done.stderr
    assert done.stdout == ""


def test_mcp_serve_with_a_server_that_cannot_start_names_it(work: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, {"mcp": [{"name": "ghost", "command": "/nonexistent/server"}]})
    done = run_awf("mcp-serve", "--config", config, cwd=work)
    assert done.returncode == 3
    assert 'MCP server "ghost" failed to start' in done.stderr


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"bultin": ["Read"]}, "unknown key 'bultin' (did you mean \"builtin\"?)"),
        ({"plugin_tools": [{"plugin": "k8s"}]}, "plugin_tools (AWF plugins) are not supported"),
        ({"builtin": ["Reed"]}, 'builtin: unknown built-in tool "Reed" (did you mean "Read"?)'),
        ({"confirm": ["Bash"]}, "not a tool of this step"),
    ],
)
def test_config_mistakes_are_user_errors(
    tmp_path: Path, data: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as caught:
        load_serve_config(_config(tmp_path, {"builtin": ["Read"], **data}))
    assert message in str(caught.value)


def test_awf_intercept_builtins_serves_every_builtin(tmp_path: Path) -> None:
    config = load_serve_config(_config(tmp_path, {"intercept_builtins": True}))
    assert config.tools.builtin == ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]
    assert config.root_dir == Path.cwd().resolve()


def test_sigterm_stops_mcp_serve_and_the_servers_it_proxies(work: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "notes.pid"
    config = _config(tmp_path, {"mcp": [notes_server("notes", "--pidfile", str(pidfile))]})
    serve = subprocess.Popen(
        [sys.executable, "-m", "awf_nb.cli", "mcp-serve", "--config", config],
        cwd=work, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text() != "", "the proxied server")
        proxied = int(pidfile.read_text())
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.returncode == 0, stderr
    wait_until(lambda: not process_alive(proxied), "the proxied server to stop")


async def test_mcp_serve_refuses_to_run_inside_an_event_loop(tmp_path: Path) -> None:
    # As `%awf mcp-serve` would in a notebook, where stdin and stdout are the kernel's.
    config = load_serve_config(None, builtin="Read", root_dir=str(tmp_path))
    with pytest.raises(UserError, match="cannot run inside a notebook"):
        run_server(config)
