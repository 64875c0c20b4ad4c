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
from typing import Any

from awf_nb.engine.ports import ToolResult, ToolSpec
from awf_nb.engine.process import default_shell
from awf_nb.secrets import Masker
from awf_nb.tools.args import as_boolean, as_integer, as_number
from awf_nb.tools.output import ToolError
from awf_nb.tools.shell import run_command
from awf_nb.workflow.tools_model import CommandTool, ToolParameter


class CommandTools:
    """A step's command tools (a `ToolSet`)."""

    def __init__(
        self,
        tools: Sequence[CommandTool],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        masker: Masker,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.cwd = Path(cwd)
        self.env = dict(env)
        self.masker = masker

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
            timeout=tool.timeout,
            masker=self.masker,
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


def _env_value(name: str, parameter: ToolParameter, value: Any) -> str:
    text: str | None
    if parameter.type == "string":
        # A number where text was asked is still plainly meant as that text.
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
        text = str(value) if ok else None
    elif parameter.type == "integer":
        number = as_integer(value)
        text = None if number is None else str(number)
    elif parameter.type == "number":
        real = as_number(value)
        text = None if real is None else _number_text(real)
    else:
        flag = as_boolean(value)
        text = None if flag is None else ("true" if flag else "false")
    if text is None:
        raise ToolError(f"{name} must be {_KINDS[parameter.type]}")
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
