"""Command tools: arguments as environment variables (no injection), checks, output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.ports import ToolResult
from awf_nb.secrets import Masker
from awf_nb.tools.commands import CommandTools
from awf_nb.tools.shell import run_command
from awf_nb.workflow.tools_model import CommandTool
from tests.support.mcp_peer import SECRET


def tools(work: Path, masker: Masker, *specs: dict[str, Any], **env: str) -> CommandTools:
    return CommandTools(
        [CommandTool.model_validate(spec) for spec in specs],
        cwd=work,
        env={**os.environ, **env},
        masker=masker,
    )


ECHO = {
    "name": "say",
    "description": "print a message",
    "parameters": {"message": {"type": "string"}},
    "command": 'printf "%s\\n" "$message"',
}


async def test_arguments_reach_the_command_as_environment_variables(
    work: Path, masker: Masker
) -> None:
    result = await tools(work, masker, ECHO).call("say", {"message": "hello there"})
    assert result == ToolResult("hello there\n")


@pytest.mark.parametrize(
    "command", ['printf "%s\\n" "$message"', "echo $message", 'eval echo "\\$message"']
)
async def test_an_argument_cannot_inject_shell_code(
    work: Path, masker: Masker, command: str
) -> None:
    (work / "x").mkdir()
    attack = "$(touch pwned); `touch pwned2`; rm -rf x"
    tool = {**ECHO, "command": command}
    result = await tools(work, masker, tool).call("say", {"message": attack})
    assert not (work / "pwned").exists()
    assert not (work / "pwned2").exists()
    assert (work / "x").is_dir()
    assert "$(touch pwned)" in result.text


async def test_the_command_runs_in_the_working_directory(work: Path, masker: Masker) -> None:
    tool = {"name": "where", "description": "pwd", "command": "pwd"}
    assert (await tools(work, masker, tool).call("where", {})).text == f"{work}\n"


async def test_a_missing_required_argument_is_an_error_result(work: Path, masker: Masker) -> None:
    result = await tools(work, masker, ECHO).call("say", {})
    assert result == ToolResult("say: missing argument: message", is_error=True)


async def test_an_unknown_argument_is_an_error_result(work: Path, masker: Masker) -> None:
    result = await tools(work, masker, ECHO).call("say", {"message": "hi", "color": "red"})
    assert result.is_error and "unknown argument color" in result.text


async def test_a_missing_optional_argument_is_empty_not_inherited(
    work: Path, masker: Masker
) -> None:
    tool = {**ECHO, "parameters": {"message": {"type": "string", "required": False}}}
    # A variable of the same name in the environment must not stand in for the argument.
    result = await tools(work, masker, tool, message="from the environment").call("say", {})
    assert result == ToolResult("\n")


async def test_types_are_checked_and_plainly_meant_values_converted(
    work: Path, masker: Masker
) -> None:
    tool = {
        "name": "show",
        "description": "show typed arguments",
        "parameters": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "verbose": {"type": "boolean"},
        },
        "command": 'echo "$count $ratio $verbose"',
    }
    command_tools = tools(work, masker, tool)
    good = await command_tools.call("show", {"count": "3", "ratio": 0.5, "verbose": True})
    bad = await command_tools.call("show", {"count": "three", "ratio": 1, "verbose": False})
    assert good == ToolResult("3 0.5 true\n")
    assert bad == ToolResult("show: count must be an integer", is_error=True)


async def test_enum_values_are_enforced(work: Path, masker: Masker) -> None:
    tool = {
        **ECHO,
        "parameters": {"message": {"type": "string", "enum": ["start", "stop"]}},
    }
    result = await tools(work, masker, tool).call("say", {"message": "reboot"})
    assert result.is_error and "one of: start, stop" in result.text


async def test_secrets_in_the_output_are_masked(work: Path) -> None:
    masker = Masker.from_sources({}, {"API_TOKEN": SECRET})
    tool = {"name": "leak", "description": "print the token", "command": 'echo "$API_TOKEN"'}
    result = await tools(work, masker, tool, API_TOKEN=SECRET).call("leak", {})
    assert result == ToolResult("***\n")


async def test_long_output_is_capped(work: Path, masker: Masker) -> None:
    tool = {"name": "flood", "description": "much output", "command": "seq 1 100000"}
    result = await tools(work, masker, tool).call("flood", {})
    assert not result.is_error
    assert result.text.startswith("1\n2\n") and result.text.endswith("99999\n100000\n")
    assert "characters omitted" in result.text


async def test_endless_output_stops_the_command(work: Path, masker: Masker) -> None:
    result = await run_command(
        ["sh", "-c", "yes"], cwd=work, env=dict(os.environ), timeout=60,
        masker=masker, hard_limit=100_000,
    )  # fmt: skip
    assert result.is_error and "the command was stopped" in result.text


async def test_a_failing_command_is_an_error_result(work: Path, masker: Masker) -> None:
    tool = {"name": "fail", "description": "fails", "command": "echo nope >&2; exit 2"}
    result = await tools(work, masker, tool).call("fail", {})
    assert result == ToolResult("nope\n[exit code 2]", is_error=True)


async def test_a_command_past_its_timeout_is_stopped(work: Path, masker: Masker) -> None:
    tool = {"name": "slow", "description": "slow", "command": "sleep 30", "timeout": 0.5}
    result = await tools(work, masker, tool).call("slow", {})
    assert result == ToolResult("[timed out after 0.5 s]", is_error=True)


async def test_the_tool_spec_is_the_declared_json_schema(work: Path, masker: Masker) -> None:
    (spec,) = tools(work, masker, ECHO).list()
    assert spec.name == "say" and spec.description == "print a message"
    assert spec.parameters == {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
        "additionalProperties": False,
    }
