"""What an agent step's `tools:` block (and AWF's `mcp_proxy:` block) IS: pydantic models.

```yaml
tools:
  builtin: [Read, Glob, Grep, Bash]      # AWF's built-ins: Read Write Edit Bash Glob Grep
  commands:                              # shell commands as tools, arguments as env vars
    - name: run_tests
      description: Run the test suite
      parameters: {path: {type: string, description: folder to test}}
      command: 'pytest -q "$path"'
  mcp:                                   # MCP servers over stdio; tools named <server>_<tool>
    - {name: notes, command: python, args: [-m, my_notes_server]}
  confirm: [Bash, run_tests]             # ask the person before these run
  max_rounds: 20                         # tool rounds per turn before the step fails
  timeout: 2m                            # the time bound of every call (default: per tool)
  max_parallel: 8                        # calls of one reply running at once
```

The models check one block on its own: known built-in names (with a did-you-mean), tool
names a model API accepts, no two tools with one name, `confirm` naming only tools of this
block, `max_rounds` between 1 and 1000, `max_parallel` between 1 and 64. Like the other
workflow models they allow extra keys, so the loader can warn about unknown ones with a
suggestion (AWF ignores them).
Building the tools themselves is `awf_nb.tools.build_toolset`.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from awf_nb.workflow.durations import Duration
from awf_nb.workflow.suggest import did_you_mean

BUILTIN_TOOLS = ("Read", "Write", "Edit", "Bash", "Glob", "Grep")

DEFAULT_MAX_ROUNDS = 20
MAX_ROUNDS_LIMIT = 1000
DEFAULT_COMMAND_TIMEOUT = 120.0
DEFAULT_MCP_STARTUP_TIMEOUT = 30.0
DEFAULT_MCP_CALL_TIMEOUT = 120.0
# How many of one reply's tool calls run at once (a reply may ask for hundreds).
DEFAULT_MAX_PARALLEL = 8
MAX_PARALLEL_LIMIT = 64
# The largest message an MCP server may send (one JSON-RPC line): a tool result, a page
# of its tool list. All its tool-list pages together are bounded by the same number.
DEFAULT_MCP_MESSAGE_BYTES = 16 * 1024 * 1024

# The function names OpenAI-style APIs accept (the strictest of the provider APIs).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A command tool's arguments become environment variables: names must be usable as such.
_PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables that change how the shell itself (or every program it starts) behaves: a model
# choosing their value could run code without ever touching the command text.
_RESERVED_PARAMETERS = frozenset(
    {"PATH", "IFS", "ENV", "BASH_ENV", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4", "HOME",
     "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT"}
)  # fmt: skip


def _not_blank_command(value: str) -> str:
    if not value.strip():
        raise ValueError("command must not be empty")
    return value


class _Model(BaseModel):
    # As model._Model (which imports this module): unknown keys are warnings, not errors,
    # and a model is built on first use, not at import.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class ToolParameter(_Model):
    """One argument of a command tool: it reaches the command as `$name`."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    description: str = ""
    required: bool = True
    enum: list[str | int | float] | None = None


class CommandTool(_Model):
    """A shell command offered to the model as a tool."""

    name: str
    description: str
    parameters: dict[str, ToolParameter] = Field(default_factory=dict)
    command: str
    # None: the block's `timeout`, else DEFAULT_COMMAND_TIMEOUT.
    timeout: Duration = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _tool_name(value)

    @field_validator("parameters")
    @classmethod
    def _parameter_names(cls, value: dict[str, ToolParameter]) -> dict[str, ToolParameter]:
        for name in value:
            if not _PARAMETER_NAME.fullmatch(name):
                raise ValueError(
                    f'parameter "{name}" cannot be an environment variable name: use letters, '
                    "digits and _ (not starting with a digit)"
                )
            if name in _RESERVED_PARAMETERS or name.startswith(("LD_", "DYLD_", "AWF_")):
                raise ValueError(
                    f'parameter "{name}" would replace the environment variable {name} of '
                    "the command: choose another name"
                )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        return _not_blank_command(value)

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments object, as sent to the model."""
        properties: dict[str, Any] = {}
        for name, parameter in self.parameters.items():
            prop: dict[str, Any] = {"type": parameter.type}
            if parameter.description:
                prop["description"] = parameter.description
            if parameter.enum is not None:
                prop["enum"] = list(parameter.enum)
            properties[name] = prop
        required = [name for name, p in self.parameters.items() if p.required]
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }


class McpServer(_Model):
    """An MCP server started (over stdio) with the step and stopped with it."""

    name: str
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    startup_timeout: Duration = DEFAULT_MCP_STARTUP_TIMEOUT
    # The time bound of each call of its tools (None: the block's `timeout`, else
    # DEFAULT_MCP_CALL_TIMEOUT).
    timeout: Duration = None
    max_message_bytes: int = Field(DEFAULT_MCP_MESSAGE_BYTES, ge=1024)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # Its tools are called <name>_<tool>, so the name itself must fit in a tool name.
        return _tool_name(value)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        return _not_blank_command(value)


class ToolsConfig(_Model):
    """An agent step's `tools:` block."""

    builtin: list[str] = Field(default_factory=list)
    commands: list[CommandTool] = Field(default_factory=list)
    mcp: list[McpServer] = Field(default_factory=list)
    confirm: list[str] = Field(default_factory=list)
    max_rounds: int = DEFAULT_MAX_ROUNDS
    # The time bound of every tool call; None: each tool's default (see docs/tools.md).
    timeout: Duration = None
    max_parallel: int = DEFAULT_MAX_PARALLEL

    @field_validator("max_rounds")
    @classmethod
    def _max_rounds(cls, value: int) -> int:
        if not 1 <= value <= MAX_ROUNDS_LIMIT:
            raise ValueError(f"max_rounds must be between 1 and {MAX_ROUNDS_LIMIT}, not {value}")
        return value

    @field_validator("max_parallel")
    @classmethod
    def _max_parallel(cls, value: int) -> int:
        if not 1 <= value <= MAX_PARALLEL_LIMIT:
            raise ValueError(
                f"max_parallel must be between 1 and {MAX_PARALLEL_LIMIT}, not {value}"
            )
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("timeout must be longer than 0 s")
        return value

    @field_validator("builtin")
    @classmethod
    def _builtin(cls, value: list[str]) -> list[str]:
        problems = []
        for name in value:
            if name not in BUILTIN_TOOLS:
                hint = did_you_mean(name, BUILTIN_TOOLS) or "known: " + ", ".join(BUILTIN_TOOLS)
                problems.append(f'unknown built-in tool "{name}" ({hint})')
        problems += _duplicates(value, "built-in tool")
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("commands")
    @classmethod
    def _commands(cls, value: list[CommandTool], info: ValidationInfo) -> list[CommandTool]:
        names = [tool.name for tool in value]
        problems = _duplicates(names, "command tool")
        builtins = set(info.data.get("builtin") or ())
        problems += [
            f'command tool "{name}" has the name of a built-in tool'
            for name in dict.fromkeys(names)
            if name in builtins
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("mcp")
    @classmethod
    def _mcp(cls, value: list[McpServer], info: ValidationInfo) -> list[McpServer]:
        problems = _duplicates([server.name for server in value], "MCP server")
        commands = [tool.name for tool in info.data.get("commands") or ()]
        for server in value:
            # Tools named <server>_<tool> could collide with a command tool's name.
            problems += [
                f'command tool "{name}" starts with "{server.name}_", which names the tools '
                f'of MCP server "{server.name}": rename one of them'
                for name in commands
                if name.startswith(server.name + "_")
            ]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("confirm")
    @classmethod
    def _confirm(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if any(key not in info.data for key in ("builtin", "commands", "mcp")):
            return value  # a field it refers to is invalid (and reported): nothing to check
        known = [
            *(info.data.get("builtin") or ()),
            *(tool.name for tool in info.data.get("commands") or ()),
        ]
        servers = [server.name for server in info.data.get("mcp") or ()]
        problems = []
        for name in value:
            # An MCP server's tools are known only once it runs: `notes` (all its tools) or
            # any `notes_<tool>` is accepted.
            if name in known or name in servers:
                continue
            if any(name.startswith(server + "_") for server in servers):
                continue
            hint = did_you_mean(name, [*known, *servers])
            if not hint:
                hint = f"this step's tools: {', '.join([*known, *servers]) or 'none'}"
            problems.append(f'confirm names "{name}", which is not a tool of this step ({hint})')
        if problems:
            raise ValueError("; ".join(problems))
        return value

    def confirms(self, tool: str) -> bool:
        """Whether calls to `tool` need the person's approval."""
        if tool in self.confirm:
            return True
        return any(
            server.name in self.confirm and tool.startswith(server.name + "_")
            for server in self.mcp
        )


class PluginTools(_Model):
    """AWF's `mcp_proxy.plugin_tools` entry (AWF plugins; not supported by awf-nb yet)."""

    plugin: str
    expose: list[str] = Field(default_factory=list)


class McpProxyConfig(_Model):
    """AWF's `mcp_proxy:` block: serve tools to a CLI agent through `awf mcp-serve`."""

    enable: bool = False
    intercept_builtins: bool = True
    plugin_tools: list[PluginTools] = Field(default_factory=list)


def _tool_name(value: str) -> str:
    if not _TOOL_NAME.fullmatch(value):
        raise ValueError(
            f'"{value}" is not a usable tool name: use 1 to 64 letters, digits, _ or -'
        )
    return value


def _duplicates(names: list[str], what: str) -> list[str]:
    counts = Counter(names)
    return [f'{what} "{name}" is listed {n} times' for name, n in counts.items() if n > 1]
