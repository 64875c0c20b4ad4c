"""`mcp_proxy` in the CLI providers: each passes a turn's MCP servers with its own mechanism.

claude `--mcp-config` + `--allowedTools=mcp__<server>`; codex `-c mcp_servers.<server>.…`;
copilot `--additional-mcp-config` + `--allow-tool=<server>`; opencode the
`OPENCODE_CONFIG_CONTENT` configuration; gemini a system-defaults settings file for the
turn. Checked on the command lines built, and on what the fake agent CLI was started with.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import FakeCli

from awf_nb.api import arun
from awf_nb.engine.ports import Final, McpServerSpec, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers.cli import gemini as gemini_module
from awf_nb.providers.cli.base import CliOptions, CliTurn
from awf_nb.providers.cli.claude import ClaudeProvider
from awf_nb.providers.cli.codex import CodexProvider, mcp_overrides
from awf_nb.providers.cli.copilot import CopilotProvider
from awf_nb.providers.cli.gemini import GeminiProvider
from awf_nb.providers.cli.opencode import OpencodeProvider
from tests.support import collect

AWF = McpServerSpec(
    name="awf",
    command="/usr/bin/python3",
    args=("-m", "awf_nb.cli", "mcp-serve", "--config", "/private/serve.json"),
)


def _turn(*servers: McpServerSpec, **options: Any) -> CliTurn:
    return CliTurn("hi", None, None, CliOptions(**options), mcp_servers=servers)


def _after_prefix(argv: list[str], prefix: str) -> list[str]:
    return [arg[len(prefix) :] for arg in argv if arg.startswith(prefix)]


# --- command lines ---------------------------------------------------------------------------


def test_claude_gets_the_servers_in_mcp_config_and_allows_their_tools() -> None:
    command = ClaudeProvider().build_command(_turn(AWF, allowed_tools=["Read"]))
    argv = command.argv
    [config] = _after_prefix(argv, "--mcp-config=")
    entry = {"type": "stdio", "command": AWF.command, "args": list(AWF.args), "alwaysLoad": True}
    assert json.loads(config) == {"mcpServers": {"awf": entry}}
    assert _after_prefix(argv, "--allowedTools=") == ["Read,mcp__awf"]
    assert argv[1:3] == ["-p", "hi"]  # the prompt still right after -p
    # alwaysLoad servers are waited for before the first request, this long at most.
    assert command.env["MCP_CONNECT_TIMEOUT_MS"] == "60000"
    assert command.env["MCP_TIMEOUT"] == "60000"


def test_claude_waits_for_no_server_when_the_turn_brings_none() -> None:
    command = ClaudeProvider().build_command(_turn())
    assert "MCP_CONNECT_TIMEOUT_MS" not in command.env and "MCP_TIMEOUT" not in command.env


def test_a_turn_without_servers_gets_no_mcp_flags() -> None:
    for provider in (ClaudeProvider(), CodexProvider(), CopilotProvider()):
        argv = provider.build_command(_turn()).argv
        assert not any("mcp" in arg for arg in argv), provider.name
        assert not any(arg.startswith("--allowedTools") for arg in argv)


def test_codex_gets_config_overrides_that_approve_the_servers_tools() -> None:
    argv = CodexProvider().build_command(_turn(AWF, extra_args=["-c", "mine=1"])).argv
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    assert overrides[:-1] == mcp_overrides(AWF) and overrides[-1] == "mine=1"  # user's last
    values = {key: tomllib.loads(f"v = {value}")["v"] for key, value in _split(overrides[:-1])}
    assert values == {
        "mcp_servers.awf.command": AWF.command,
        "mcp_servers.awf.args": list(AWF.args),
        "mcp_servers.awf.startup_timeout_sec": 60,
        "mcp_servers.awf.tool_timeout_sec": 900,
        "mcp_servers.awf.required": True,
        "mcp_servers.awf.default_tools_approval_mode": "approve",
    }
    assert argv[-1] == "hi"


def test_codex_overrides_are_valid_toml_for_any_text() -> None:
    tricky = 'a "quoted" \\ back\\slash, tab\t, é, 🙂, ]'
    server = McpServerSpec("my tools", "cmd", (tricky,), (("TOKEN_FILE", tricky),))
    document = "\n".join(
        f"{key} = {value}" for key, value in _split(mcp_overrides(server))
    )  # as codex reads `-c key=value`: a dotted key and a TOML value
    parsed = tomllib.loads(document)["mcp_servers"]["my tools"]
    assert parsed["args"] == [tricky]
    assert parsed["env"] == {"TOKEN_FILE": tricky}


def test_copilot_adds_the_servers_for_the_session_and_allows_them() -> None:
    argv = CopilotProvider().build_command(_turn(AWF, allowed_tools=["Read"])).argv
    [config] = _after_prefix(argv, "--additional-mcp-config=")
    assert json.loads(config) == {
        "mcpServers": {
            "awf": {"type": "local", "command": AWF.command, "args": list(AWF.args), "tools": ["*"]}
        }
    }
    assert _after_prefix(argv, "--allow-tool=") == ["Read", "awf"]


def _split(overrides: list[str]) -> list[tuple[str, str]]:
    return [tuple(item.split("=", 1)) for item in overrides]  # type: ignore[misc]


# --- configuration merged with the user's ----------------------------------------------------


def _opencode_env(user_config: Any = None) -> dict[str, str]:
    env = {} if user_config is None else {"OPENCODE_CONFIG_CONTENT": json.dumps(user_config)}
    OpencodeProvider().prepare_env(_turn(AWF), env, _stack())
    return env


def _stack() -> contextlib.ExitStack:
    return contextlib.ExitStack()


def test_opencode_adds_the_servers_to_the_users_config() -> None:
    user = {"model": "fake/m", "mcp": {"mine": {"type": "remote"}}, "permission": {"bash": "ask"}}
    config = json.loads(_opencode_env(user)["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == "fake/m"
    assert config["mcp"]["mine"] == {"type": "remote"}
    assert config["mcp"]["awf"] == {
        "type": "local",
        "command": [AWF.command, *AWF.args],
        "environment": {},
        "enabled": True,
        "timeout": 60_000,
    }
    assert config["permission"] == {"bash": "ask", "awf_*": "allow"}


def test_opencode_keeps_a_one_word_permission_for_the_other_tools() -> None:
    config = json.loads(_opencode_env({"permission": "ask"})["OPENCODE_CONFIG_CONTENT"])
    assert config["permission"] == {"*": "ask", "awf_*": "allow"}
    assert json.loads(_opencode_env()["OPENCODE_CONFIG_CONTENT"])["mcp"]["awf"]["enabled"]


def test_opencode_with_a_broken_user_config_is_a_clear_error() -> None:
    env = {"OPENCODE_CONFIG_CONTENT": "{not json"}
    with pytest.raises(ProviderError, match="OPENCODE_CONFIG_CONTENT is not valid JSON"):
        OpencodeProvider().prepare_env(_turn(AWF), env, _stack())


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Gemini's conditions met: awf runs as root, with a root-only folder (tmp_path here)."""
    folder = tmp_path / "root-only"
    folder.mkdir()
    monkeypatch.setattr(gemini_module, "_running_as_root", lambda: True)
    monkeypatch.setattr(gemini_module, "_root_only_folder", lambda: folder)
    return folder


def test_gemini_gets_a_defaults_file_for_the_turn_with_the_users_defaults(
    as_root: Path, tmp_path: Path
) -> None:
    own = tmp_path / "own-defaults.json"
    own.write_text(json.dumps({"ui": {"theme": "x"}, "mcpServers": {"mine": {"command": "m"}}}))
    env = {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(own)}
    with _stack() as stack:
        GeminiProvider().prepare_env(_turn(AWF), env, stack)
        written = Path(env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"])
        assert written.parent == as_root
        settings = json.loads(written.read_text())
    assert not written.exists(), "removed when the turn ends"
    assert settings["ui"] == {"theme": "x"}
    assert settings["mcpServers"]["mine"] == {"command": "m"}
    assert settings["mcpServers"]["awf"] == {
        "command": AWF.command,
        "args": list(AWF.args),
        "trust": True,  # a headless gemini offers no tool that would need approval
        "timeout": 900_000,
    }


def test_gemini_finds_the_defaults_file_as_gemini_does() -> None:
    find = gemini_module.system_defaults_path
    assert find({"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "/a/d.json"}) == Path("/a/d.json")
    settings = {"GEMINI_CLI_SYSTEM_SETTINGS_PATH": "/b/settings.json"}
    assert find(settings) == Path("/b/system-defaults.json")
    assert find({}) == Path("/etc/gemini-cli/system-defaults.json")


def test_gemini_when_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemini_module, "_running_as_root", lambda: False)
    with pytest.raises(ProviderError, match="settings files owned by root") as caught:
        GeminiProvider().prepare_env(_turn(AWF), {}, _stack())
    assert "another agent CLI" in str(caught.value)


def test_gemini_without_servers_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemini_module, "_running_as_root", lambda: False)
    env: dict[str, str] = {}
    GeminiProvider().prepare_env(_turn(), env, _stack())
    assert env == {}


# --- what the CLI is started with (the fake agent CLI) -----------------------------------------

SAMPLES = {
    "claude": "claude-turn1.jsonl",
    "gemini": "gemini-turn1.jsonl",
    "codex": "codex-turn1.jsonl",
    "opencode": "opencode-turn1.jsonl",
    "copilot": "copilot-turn1.jsonl",
}
PROVIDERS = {
    "claude": ClaudeProvider,
    "gemini": GeminiProvider,
    "codex": CodexProvider,
    "opencode": OpencodeProvider,
    "copilot": CopilotProvider,
}


@pytest.mark.parametrize("binary", list(SAMPLES))
async def test_a_turn_with_servers_starts_the_cli_with_them(
    fake_cli: FakeCli, binary: str, as_root: Path
) -> None:
    fake_cli.install(binary)
    fake_cli.plan({"sample": SAMPLES[binary]})
    request = TurnRequest(
        prompt="hello", working_dir=fake_cli.workdir, env=fake_cli.env, mcp_servers=[AWF]
    )
    events = await collect(PROVIDERS[binary]().stream(request))
    assert isinstance(events[-1], Final)

    [record] = fake_cli.records()
    argv, env = record["argv"], record["env"]
    if binary == "claude":
        assert "mcp__awf" in _after_prefix(argv, "--allowedTools=")[0]
        assert "awf" in json.loads(_after_prefix(argv, "--mcp-config=")[0])["mcpServers"]
    elif binary == "codex":
        assert 'mcp_servers.awf.default_tools_approval_mode="approve"' in argv
    elif binary == "copilot":
        assert "--allow-tool=awf" in argv and _after_prefix(argv, "--additional-mcp-config=")
    elif binary == "opencode":
        assert "awf" in json.loads(env["OPENCODE_CONFIG_CONTENT"])["mcp"]
    else:
        assert Path(env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]).parent == as_root
        assert "awf" in json.loads(record["settings_file"])["mcpServers"]
        assert not list(as_root.iterdir()), "the settings file went with the turn"


async def test_a_workflow_step_with_mcp_proxy_gives_the_cli_awfs_server(
    fake_cli: FakeCli, tmp_path: Path
) -> None:
    """api → the run's McpProxy → the engine → claude's --mcp-config: `awf mcp-serve`."""
    fake_cli.install("claude")
    fake_cli.plan({"sample": "claude-turn1.jsonl"})
    stamp = {
        "name": "stamp",
        "description": "Stamp a word",
        "parameters": {"word": {"type": "string"}},
        "command": 'echo "stamped-$word"',
    }
    workflow = {
        "name": "proxied",
        "states": {
            "initial": "ask",
            "ask": {
                "type": "agent",
                "provider": "claude",
                "prompt": "stamp something",
                "options": {"env": fake_cli.env},
                "mcp_proxy": {"enable": True},
                "tools": {"commands": [stamp]},
                "on_success": "done",
            },
            "done": {"type": "terminal"},
        },
    }
    result = await arun(yaml.safe_dump(workflow), {}, storage=False, cwd=fake_cli.workdir)
    assert result.ok, result.error

    [record] = fake_cli.records()
    config = json.loads(_after_prefix(record["argv"], "--mcp-config=")[0])
    server = config["mcpServers"]["awf"]
    assert server["command"] == sys.executable
    assert server["args"][-3:-1] == ["mcp-serve", "--config"]
    assert "mcp__awf" in _after_prefix(record["argv"], "--allowedTools=")[0]
