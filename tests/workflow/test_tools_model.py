"""The `tools:` block's models: defaults, and a clear message for every mistake."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from awf_nb.workflow.tools_model import McpProxyConfig, ToolsConfig


def problems(data: dict[str, Any]) -> dict[str, str]:
    """YAML path -> message of every problem found in `data`."""
    with pytest.raises(ValidationError) as caught:
        ToolsConfig.model_validate(data)
    return {
        ".".join(str(part) for part in error["loc"]): error["msg"].removeprefix("Value error, ")
        for error in caught.value.errors(include_url=False)
    }


def test_an_empty_block_has_the_defaults() -> None:
    config = ToolsConfig.model_validate({})
    assert (config.builtin, config.commands, config.mcp, config.confirm) == ([], [], [], [])
    assert config.max_rounds == 20


def test_a_full_block_is_read() -> None:
    config = ToolsConfig.model_validate(
        {
            "builtin": ["Read", "Bash"],
            "commands": [
                {
                    "name": "run_tests",
                    "description": "run the tests",
                    "parameters": {"path": {"type": "string", "description": "folder"}},
                    "command": 'pytest -q "$path"',
                    "timeout": "2m",
                }
            ],
            "mcp": [{"name": "notes", "command": "python", "args": ["-m", "notes"]}],
            "confirm": ["Bash", "run_tests", "notes_add"],
            "max_rounds": 5,
        }
    )
    assert config.commands[0].timeout == 120.0
    assert config.mcp[0].startup_timeout == 30.0
    assert config.confirms("notes_add") and not config.confirms("notes_list")


def test_an_unknown_builtin_gets_a_suggestion() -> None:
    assert problems({"builtin": ["read"]}) == {
        "builtin": 'unknown built-in tool "read" (did you mean "Read"?)'
    }
    assert (
        "known: Read, Write, Edit, Bash, Glob, Grep" in problems({"builtin": ["Fetch"]})["builtin"]
    )


def test_duplicate_tool_names_are_refused() -> None:
    say = {"name": "say", "description": "d", "command": "echo"}
    found = problems(
        {
            "builtin": ["Read", "Read"],
            "commands": [say, say],
            "mcp": [{"name": "n", "command": "x"}, {"name": "n", "command": "y"}],
        }
    )
    assert found["builtin"] == 'built-in tool "Read" is listed 2 times'
    assert found["commands"] == 'command tool "say" is listed 2 times'
    assert found["mcp"] == 'MCP server "n" is listed 2 times'


def test_a_command_tool_cannot_take_a_builtin_or_mcp_name() -> None:
    builtin = problems(
        {"builtin": ["Bash"], "commands": [{"name": "Bash", "description": "d", "command": "x"}]}
    )
    mcp = problems(
        {
            "commands": [{"name": "notes_add", "description": "d", "command": "x"}],
            "mcp": [{"name": "notes", "command": "x"}],
        }
    )
    assert builtin["commands"] == 'command tool "Bash" has the name of a built-in tool'
    assert 'command tool "notes_add" starts with "notes_"' in mcp["mcp"]


def test_confirm_must_name_a_tool_of_the_step() -> None:
    found = problems({"builtin": ["Read", "Bash"], "confirm": ["bash", "Write"]})
    assert found["confirm"] == (
        'confirm names "bash", which is not a tool of this step (did you mean "Bash"?); '
        'confirm names "Write", which is not a tool of this step (this step\'s tools: Read, Bash)'
    )


@pytest.mark.parametrize("value", [0, 1001, -3])
def test_max_rounds_is_between_1_and_1000(value: int) -> None:
    assert problems({"max_rounds": value}) == {
        "max_rounds": f"max_rounds must be between 1 and 1000, not {value}"
    }


@pytest.mark.parametrize(
    ("parameter", "message"),
    [
        ("my-arg", 'parameter "my-arg" cannot be an environment variable name'),
        ("PATH", 'parameter "PATH" would replace the environment variable PATH'),
        ("LD_PRELOAD", 'parameter "LD_PRELOAD" would replace'),
    ],
)
def test_parameter_names_must_be_safe_environment_variables(parameter: str, message: str) -> None:
    found = problems(
        {
            "commands": [
                {"name": "t", "description": "d", "command": "x", "parameters": {parameter: {}}}
            ]
        }
    )
    assert found["commands.0.parameters"].startswith(message)


def test_tool_and_server_names_must_suit_model_apis() -> None:
    found = problems(
        {
            "commands": [{"name": "run tests", "description": "d", "command": "x"}],
            "mcp": [{"name": "my.server", "command": "x"}],
        }
    )
    assert found["commands.0.name"].startswith('"run tests" is not a usable tool name')
    assert found["mcp.0.name"].startswith('"my.server" is not a usable tool name')


def test_a_command_tool_needs_a_description_and_a_command() -> None:
    found = problems({"commands": [{"name": "t", "command": "  "}]})
    assert found["commands.0.description"] == "Field required"
    assert found["commands.0.command"] == "command must not be empty"


def test_the_mcp_proxy_block_defaults_to_awf() -> None:
    proxy = McpProxyConfig.model_validate({"enable": True})
    assert proxy.intercept_builtins is True and proxy.plugin_tools == []


def test_timeout_and_max_parallel_are_read_with_their_defaults() -> None:
    from awf_nb.workflow.tools_model import DEFAULT_MAX_PARALLEL

    default = ToolsConfig()
    assert (default.timeout, default.max_parallel) == (None, DEFAULT_MAX_PARALLEL)
    config = ToolsConfig.model_validate(
        {
            "timeout": "1m30s",
            "max_parallel": 2,
            "mcp": [{"name": "n", "command": "x", "timeout": 5, "max_message_bytes": 4096}],
            "commands": [{"name": "c", "description": "d", "command": "true", "timeout": "2s"}],
        }
    )
    assert (config.timeout, config.max_parallel) == (90.0, 2)
    assert (config.mcp[0].timeout, config.mcp[0].max_message_bytes) == (5.0, 4096)
    assert config.commands[0].timeout == 2.0


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"max_parallel": 0}, "max_parallel must be between 1 and 64, not 0"),
        ({"max_parallel": 65}, "max_parallel must be between 1 and 64, not 65"),
        ({"timeout": 0}, "timeout must be longer than 0 s"),
        ({"timeout": "soon"}, "invalid duration 'soon'"),
    ],
)
def test_bad_limits_are_refused_with_their_name(block: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ToolsConfig.model_validate(block)
    assert message in str(caught.value)


def test_the_editor_schema_knows_the_limits() -> None:
    from awf_nb.workflow.loader.schema import json_schema

    properties = json_schema()["$defs"]["ToolsConfig"]["properties"]
    assert {"type": "string", "pattern": properties["timeout"]["anyOf"][1]["pattern"]} in (
        properties["timeout"]["anyOf"]
    )
    assert properties["max_parallel"]["type"] == "integer"
