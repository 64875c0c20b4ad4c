"""Command tools: shell commands a workflow offers to the model, with typed arguments.

```yaml
commands:
  - name: run_tests
    description: Run the test suite; returns its output
    parameters: {path: {type: string, description: folder to test}}
    command: 'pytest -q "$path"'
```

The command text is fixed by the workflow; the model's arguments reach it only as
environment variables (`$path`), never pasted into the shell text, so an argument such as
`$(touch pwned); rm -rf x` is just a string the command receives. (Quote them in the
command — `"$path"` — as in any shell script, or word splitting applies.) Arguments are
checked against the declared types first; a missing optional one is an empty variable, so
nothing of the same name leaks in from the environment. The command runs in the step's
working directory with the step's environment, through the project's process supervisor;
its output is capped and secret-masked like a command step's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, TypeAdapter, ValidationError

from awf_nb.engine.ports import ToolResult, ToolSpec
from awf_nb.engine.process import default_shell
from awf_nb.secrets import Masker
from awf_nb.tools.args import Integer
from awf_nb.tools.output import ToolError
from awf_nb.tools.shell import run_command
from awf_nb.workflow.tools_model import DEFAULT_COMMAND_TIMEOUT, CommandTool, ToolParameter


class CommandTools:
    """A step's command tools (a `ToolSet`)."""

    def __init__(
        self,
        tools: Sequence[CommandTool],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        masker: Masker,
        timeout: float | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.cwd = Path(cwd)
        self.env = dict(env)
        self.masker = masker
        self.timeout = timeout  # the block's `tools.timeout`

    def time_limit(self, name: str) -> float:
        """How long a call of `name` may run: its own `timeout`, else the block's."""
        tool = self.tools.get(name)
        own = tool.timeout if tool is not None else None
        if own is not None:
            return own
        return self.timeout if self.timeout is not None else DEFAULT_COMMAND_TIMEOUT

    def list(self) -> list[ToolSpec]:
        return [
            ToolSpec(tool.name, tool.description, tool.json_schema())
            for tool in self.tools.values()
        ]

    def needs_confirmation(self, name: str) -> bool:
        return False  # the step's `confirm` list decides (awf_nb.tools.StepToolSet)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f'unknown tool "{name}"', is_error=True)
        try:
            variables = argument_env(tool, arguments)
        except ToolError as exc:
            return ToolResult(self.masker.mask(f"{name}: {exc}"), is_error=True)
        env = {**self.env, **variables, "AWF_TOOL": name}
        return await run_command(
            [default_shell(), "-c", tool.command],
            cwd=self.cwd,
            env=env,
            timeout=self.time_limit(name),
            masker=self.masker,
            contain=True,
        )

    async def aclose(self) -> None:
        return None


def argument_env(tool: CommandTool, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The environment variables for a call's arguments, checked against the declaration."""
    unknown = [key for key in arguments if key not in tool.parameters]
    if unknown:
        takes = ", ".join(tool.parameters) or "no arguments"
        raise ToolError(f"unknown argument {', '.join(unknown)} ({tool.name} takes: {takes})")
    variables: dict[str, str] = {}
    for name, parameter in tool.parameters.items():
        value = arguments.get(name)
        if value is None:
            if parameter.required:
                raise ToolError(f"missing argument: {name}")
            variables[name] = ""
            continue
        variables[name] = _env_value(name, parameter, value)
    return variables


_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


# The same lax reading as the built-ins' arguments (awf_nb.tools.args): "20" for 20,
# "true" for true; a number where text was asked is still plainly meant as that text.
def _not_a_flag(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


_READERS: dict[str, TypeAdapter[Any]] = {
    "string": TypeAdapter(str | int | float),
    "integer": TypeAdapter(Integer),
    "number": TypeAdapter(Annotated[float, BeforeValidator(_not_a_flag)]),
    "boolean": TypeAdapter(bool),
}


def _env_value(name: str, parameter: ToolParameter, value: Any) -> str:
    if isinstance(value, bool) and parameter.type != "boolean":
        raise ToolError(f"{name} must be {_KINDS[parameter.type]}")
    try:
        read = _READERS[parameter.type].validate_python(value)
    except ValidationError:
        raise ToolError(f"{name} must be {_KINDS[parameter.type]}") from None
    if parameter.type == "boolean":
        text = "true" if read else "false"
    elif isinstance(read, str):
        text = read
    else:
        text = _number_text(read)
    if "\0" in text:
        raise ToolError(f"{name} must not contain a NUL character")
    if parameter.enum is not None and text not in {_enum_text(item) for item in parameter.enum}:
        choices = ", ".join(_enum_text(item) for item in parameter.enum)
        raise ToolError(f"{name} must be one of: {choices}")
    return text


def _number_text(value: int | float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _enum_text(value: str | int | float) -> str:
    return _number_text(value) if isinstance(value, int | float) else value
