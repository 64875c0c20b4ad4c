"""`mcp_proxy`'s factory: the serve config it writes, the server it returns, cleanup."""

from __future__ import annotations

import gc
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from awf_nb.engine.ports import McpServerSpec
from awf_nb.errors import ExecutionError, UserError
from awf_nb.tools.env_channel import fetch_env
from awf_nb.tools.proxy import McpProxy, serve_config
from awf_nb.workflow.tools_model import BUILTIN_TOOLS, McpProxyConfig, ToolsConfig

STAMP = {
    "name": "stamp",
    "description": "Stamp a word",
    "parameters": {"word": {"type": "string"}},
    "command": 'echo "stamped-$word from $PROJECT"',
}


def _tools(**block: Any) -> ToolsConfig:
    return ToolsConfig.model_validate(block)


def _config_of(spec: McpServerSpec) -> tuple[Path, dict[str, Any]]:
    path = Path(spec.args[spec.args.index("--config") + 1])
    return path, json.loads(path.read_text())


def test_the_step_tools_and_all_builtins_are_served_from_a_private_file(work: Path) -> None:
    proxy = McpProxy()
    env = {"PROJECT": "demo", "API_TOKEN": "secret-value"}
    spec = proxy(_tools(commands=[STAMP]), McpProxyConfig(enable=True), work, env, False)

    assert spec.name == "awf" and spec.command == sys.executable
    assert spec.args[-3:-1] == ("mcp-serve", "--config") and "--yes" not in spec.args
    assert not any("secret-value" in arg for arg in spec.args), "secrets stay out of argv"
    assert spec.env == ()
    path, config = _config_of(spec)
    assert config["builtin"] == list(BUILTIN_TOOLS)  # intercept_builtins (the default)
    assert [tool["name"] for tool in config["commands"]] == ["stamp"]
    assert config["root_dir"] == str(work)
    # the environment is served by this process, never written: the file names a socket
    assert "env" not in config and "secret-value" not in path.read_text()
    channel = config["env_channel"]
    assert fetch_env(channel["socket"], channel["token"]) == env
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    proxy.close()
    with pytest.raises(UserError, match="cannot get the command environment"):
        fetch_env(channel["socket"], channel["token"])


def test_a_wrong_token_gets_no_environment(work: Path) -> None:
    proxy = McpProxy()
    spec = proxy(None, McpProxyConfig(enable=True), work, {"API_TOKEN": "secret-value"}, False)
    channel = _config_of(spec)[1]["env_channel"]
    with pytest.raises(UserError, match="the token is not known"):
        fetch_env(channel["socket"], "0" * 48)
    proxy.close()


KILLED = """
import sys
from pathlib import Path
from awf_nb.tools.proxy import McpProxy
from awf_nb.workflow.tools_model import McpProxyConfig
proxy = McpProxy()
spec = proxy(None, McpProxyConfig(enable=True), Path.cwd(), {"API_TOKEN": sys.argv[2]}, False,
             Path(sys.argv[1]))
print(spec.args[spec.args.index("--config") + 1], flush=True)
sys.stdin.read()  # held until killed
"""


def test_after_kill_9_no_secret_of_the_environment_is_on_disk(tmp_path: Path) -> None:
    secret = "sk-proxy-secret-4242"
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    run_dir.mkdir(parents=True)
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(run_dir), secret],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert process.stdout is not None
    path = Path(process.stdout.readline().strip())
    config = json.loads(path.read_text())
    socket_dir = Path(config["env_channel"]["socket"]).parent
    # while the process lives, a server it names gets the secret from it
    assert fetch_env(**_channel(config)) == {"API_TOKEN": secret}
    process.kill()
    process.wait(timeout=30)
    left = [p for p in [*run_dir.rglob("*"), *socket_dir.rglob("*")] if p.is_file()]
    assert path in left  # the crash left the config file behind...
    assert not any(secret.encode() in p.read_bytes() for p in left)  # ...with no secret
    with pytest.raises(UserError, match="cannot get the command environment"):
        fetch_env(**_channel(config))
    shutil.rmtree(socket_dir, ignore_errors=True)


def _channel(config: dict[str, Any]) -> dict[str, str]:
    return {"path": config["env_channel"]["socket"], "token": config["env_channel"]["token"]}


def test_yes_lets_the_server_run_confirmable_tools() -> None:
    spec = McpProxy()(None, McpProxyConfig(enable=True), Path.cwd(), {}, True)
    assert spec.args[-1] == "--yes"


@pytest.mark.parametrize(
    ("block", "intercept", "builtin"),
    [
        ({"builtin": ["Read"]}, True, ["Read"]),  # the step's own list wins
        ({"commands": [STAMP]}, False, None),  # no built-ins asked for
        (None, True, list(BUILTIN_TOOLS)),  # no tools: block at all
    ],
)
def test_intercept_builtins_serves_all_six_only_without_a_builtin_list(
    work: Path, block: dict[str, Any] | None, intercept: bool, builtin: list[str] | None
) -> None:
    tools = None if block is None else _tools(**block)
    config = serve_config(tools, McpProxyConfig(intercept_builtins=intercept), work, {})
    assert config.get("builtin") == builtin


def test_unknown_keys_of_the_tools_block_are_left_out(work: Path) -> None:
    tools = _tools(commands=[STAMP], colour="blue", max_rounds=3)
    config = serve_config(tools, McpProxyConfig(), work, {})
    assert set(config) == {"builtin", "commands", "root_dir"}


def test_plugin_tools_are_a_clear_error(work: Path) -> None:
    proxy = McpProxyConfig.model_validate(
        {"enable": True, "plugin_tools": [{"plugin": "jira", "expose": ["search"]}]}
    )
    with pytest.raises(ExecutionError, match=r"plugin_tools \(jira\).*not supported by awf-nb"):
        McpProxy()(None, proxy, work, {}, False)


def test_nothing_to_serve_is_a_clear_error(work: Path) -> None:
    with pytest.raises(ExecutionError, match="no tools to serve"):
        McpProxy()(None, McpProxyConfig(intercept_builtins=False), work, {}, False)


def test_what_mcp_serve_would_refuse_fails_at_the_step_start(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError, match=r"mcp_proxy: .*does not exist"):
        McpProxy()(None, McpProxyConfig(), tmp_path / "missing", {}, False)


def test_a_step_run_again_reuses_its_file_and_close_removes_them(work: Path) -> None:
    proxy = McpProxy()
    first = proxy(None, McpProxyConfig(), work, {"A": "1"}, False)
    again = proxy(None, McpProxyConfig(), work, {"A": "1"}, False)
    other = proxy(None, McpProxyConfig(), work, {"A": "2"}, False)
    assert first == again and first != other
    folder = proxy.directory
    assert folder is not None and len(list(folder.iterdir())) == 2
    proxy.close()
    assert not folder.exists()
    # a later step gets a new folder
    assert _config_of(proxy(None, McpProxyConfig(), work, {}, False))[0].exists()
    proxy.close()


def test_the_files_go_with_the_factory(work: Path) -> None:
    proxy = McpProxy()
    proxy(None, McpProxyConfig(), work, {}, False)
    folder = proxy.directory
    assert folder is not None and folder.exists()
    del proxy
    gc.collect()
    assert not folder.exists()


async def test_the_returned_server_serves_the_step_tools(work: Path) -> None:
    """The spec, started as an agent CLI would (no PYTHONPATH, another cwd), serves."""
    (work / "notes.txt").write_text("a note\n")
    proxy = McpProxy()
    tools = _tools(commands=[STAMP])
    spec = proxy(tools, McpProxyConfig(enable=True), work, {"PROJECT": "demo"}, False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = StdioServerParameters(
        command=spec.command, args=list(spec.args), env={**env, **dict(spec.env)}, cwd="/"
    )
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == {*BUILTIN_TOOLS, "stamp"}
        stamped = await session.call_tool("stamp", {"word": "hi"})
        read_back = await session.call_tool("Read", {"path": "notes.txt"})
    assert stamped.content[0].text.strip() == "stamped-hi from demo"
    assert "a note" in read_back.content[0].text


def test_the_config_file_lives_in_the_runs_private_folder(work: Path, tmp_path: Path) -> None:
    """Not in a shared temporary folder, where a crash would leave the environment: in the
    run's own folder, private like its state; what a killed run left there is replaced."""
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    stale = run_dir / "mcp-proxy" / "serve-stale.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")  # left by the run's killed first attempt
    proxy = McpProxy()
    spec = proxy(None, McpProxyConfig(enable=True), work, {"API_TOKEN": "t"}, False, run_dir)
    path, _ = _config_of(spec)
    assert path.parent == run_dir / "mcp-proxy"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not stale.exists()
    proxy.close()
    assert not (run_dir / "mcp-proxy").exists()


def test_the_steps_limits_reach_the_server(work: Path) -> None:
    tools = _tools(builtin=["Bash"], timeout="30s", max_parallel=2)
    proxy = McpProxy()  # its files live as long as it does
    _, config = _config_of(proxy(tools, McpProxyConfig(enable=True), work, {}, False))
    assert (config["timeout"], config["max_parallel"]) == (30.0, 2)


async def test_the_steps_size_limits_reach_the_server_and_it_applies_them(work: Path) -> None:
    from awf_nb.tools import build_toolset
    from awf_nb.tools.serve import load_serve_config

    tools = _tools(builtin=["Read"], max_read_bytes=2048, max_walk_entries=7)
    proxy = McpProxy()
    path, config = _config_of(proxy(tools, McpProxyConfig(enable=True), work, {}, False))
    assert (config["max_read_bytes"], config["max_walk_entries"]) == (2048, 7)
    assert "max_grep_bytes" not in config  # not set by the step: mcp-serve's default
    (work / "long.txt").write_text("a line of text\n" * 500)
    served = load_serve_config(str(path))
    async with build_toolset(served.tools, cwd=served.root_dir, env={}) as toolset:
        result = await toolset.call("Read", {"path": "long.txt"})
    assert "[Read stops at 2 KiB per call (tools.max_read_bytes)" in result.text
