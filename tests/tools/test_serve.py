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


class RawClient:
    """`awf mcp-serve` driven with raw JSON-RPC lines: requests can be pipelined, and a
    line can be anything."""

    def __init__(self, config: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "awf_nb.cli", "mcp-serve", "--config", config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=_env(),
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert "result" in self.receive()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "awf mcp-serve closed its stdout"
        return json.loads(line)

    def call(self, number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }

    def close(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


def test_mcp_serve_runs_at_most_max_parallel_calls_at_once(work: Path, tmp_path: Path) -> None:
    counter, peaks, lock = tmp_path / "running", tmp_path / "peaks", tmp_path / "lock"
    counter.write_text("0")
    enter = f"n=$(($(cat {counter}) + 1)); echo $n > {counter}; echo $n >> {peaks}"
    leave = f"echo $(($(cat {counter}) - 1)) > {counter}"
    command = {
        "name": "busy",
        "description": "works for a while",
        "command": f"flock {lock} sh -c '{enter}'; sleep 0.2; flock {lock} sh -c '{leave}'",
    }
    config = _config(tmp_path, {"root_dir": str(work), "commands": [command], "max_parallel": 2})
    client = RawClient(config, work)
    try:
        for number in range(1, 31):  # pipelined: all sent before any answer
            client.send(client.call(number, "busy", {}))
        answers = [client.receive() for _ in range(30)]
    finally:
        client.close()
    assert sorted(answer["id"] for answer in answers) == list(range(1, 31))
    assert not [a for a in answers if a["result"].get("isError")]
    peak = max(int(line) for line in peaks.read_text().split())
    assert 1 < peak <= 2


def test_mcp_serve_skips_an_overlong_request_line(work: Path, tmp_path: Path) -> None:
    from awf_nb.tools.serve import MAX_REQUEST_BYTES

    config = _config(tmp_path, {"root_dir": str(work), "builtin": ["Write", "Glob"]})
    client = RawClient(config, work)
    try:
        huge = client.call(
            1, "Write", {"path": "big.txt", "content": "x" * (MAX_REQUEST_BYTES + 1)}
        )
        client.send(json.dumps(huge).encode())
        refused = client.receive()
        client.send(client.call(2, "Glob", {"pattern": "*"}))
        after = client.receive()
    finally:
        stderr = client.close()
    assert refused["id"] == 1 and refused["result"]["isError"]
    assert f"longer than {MAX_REQUEST_BYTES} bytes" in refused["result"]["content"][0]["text"]
    assert not (work / "big.txt").exists()
    assert after["id"] == 2 and not after["result"]["isError"]
    assert "a request longer than" in stderr
