"""The data templates and conditions see while a run executes, and rendering with it.

One `RunContext` per run holds the namespaces (`inputs`, `states`, `env`, `workflow`,
`context`, and `loop`/`error` when they apply). Step views are cached and refreshed when a
step's state changes, so rendering a prompt does not rebuild the whole run's data.
Template and condition errors become `ExecutionError`s that name the step and the field.
"""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awf_nb.engine.state import RunState, StepState, now
from awf_nb.errors import ExecutionError
from awf_nb.workflow import expr, template
from awf_nb.workflow.files import FileTooLarge, read_text_capped


@dataclass
class LoopFrame:
    """`.loop.*` inside a for_each / while body."""

    item: Any
    index: int
    length: int | None
    parent: LoopFrame | None = None

    def view(self) -> dict[str, Any]:
        return {
            "Item": self.item,
            "Index": self.index,
            "Index1": self.index + 1,
            "First": self.index == 0,
            "Last": self.length is not None and self.index == self.length - 1,
            "Length": self.length if self.length is not None else -1,
            "Parent": self.parent.view() if self.parent else None,
        }


@dataclass
class RunContext:
    state: RunState
    inputs: Mapping[str, Any]  # the real (unmasked) values
    env: Mapping[str, str]
    cwd: Path
    base_dir: Path  # the workflow file's folder (script_file, prompt_file, readFile)
    _views: dict[str, dict[str, Any]] = field(default_factory=dict)
    _static: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
        self._static = {
            "inputs": dict(self.inputs),
            "env": dict(self.env),
            "context": {
                "WorkingDir": str(self.cwd),
                "User": user,
                "Hostname": socket.gethostname(),
            },
        }
        for name, step in self.state.steps.items():
            self._views[name] = step.template_view()

    def refresh(self, step: StepState) -> None:
        """Call after a step's state changed so templates see the new values."""
        self._views[step.name] = step.template_view()

    def data(
        self, *, loop: LoopFrame | None = None, error: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        state = self.state
        data = {
            **self._static,
            "states": self._views,
            "workflow": {
                "ID": state.run_id,
                "Name": state.workflow_name,
                "CurrentState": state.current_step,
                "StartedAt": state.started_at.isoformat(),
                "Duration": f"{(now() - state.started_at).total_seconds():.1f}s",
            },
        }
        if loop is not None:
            data["loop"] = loop.view()
        if error is not None:
            data["error"] = dict(error)
        return data

    def render(
        self,
        source: str,
        *,
        step: str,
        what: str,
        loop: LoopFrame | None = None,
        error: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Render a template field of a step; errors name the step and the field.

        `extra`: more top-level names (`.reply` in a conversation partner's prompt)."""
        if "{{" not in source:
            return source
        data = self.data(loop=loop, error=error)
        if extra:
            data.update(extra)
        try:
            return template.parse(source).render(data, base_dir=self.base_dir, name=what)
        except template.TemplateError as exc:
            raise ExecutionError(f"step {step}: {what}: {exc}", step=step) from None

    def render_file(
        self, name: str, *, step: str, what: str, loop: LoopFrame | None = None
    ) -> tuple[Path, str]:
        """A template file (`prompt_file`, `script_file`): its path, and its text rendered.

        The name is a template too, relative to the workflow's folder; the file is read
        with the 1 MiB cap every workflow file read has.
        """
        path = self.base_dir / self.render(name, step=step, what=what, loop=loop)
        try:
            source = read_text_capped(path)
        except FileTooLarge:
            raise ExecutionError(
                f"step {step}: {what} {path} is larger than 1 MiB", step=step
            ) from None
        except OSError as exc:
            raise ExecutionError(
                f"step {step}: cannot read {what} {path}: {exc.strerror or exc}", step=step
            ) from None
        return path, self.render(source, step=step, what=f"{what} {path.name}", loop=loop)

    def render_value(self, value: Any, *, step: str, what: str, loop: LoopFrame | None) -> Any:
        """Render every string inside a value (provider options, call inputs)."""
        if isinstance(value, str):
            return self.render(value, step=step, what=what, loop=loop)
        if isinstance(value, list):
            return [self.render_value(v, step=step, what=what, loop=loop) for v in value]
        if isinstance(value, dict):
            return {
                k: self.render_value(v, step=step, what=f"{what}.{k}", loop=loop)
                for k, v in value.items()
            }
        return value

    def condition(
        self,
        source: str,
        *,
        step: str,
        what: str,
        loop: LoopFrame | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> bool:
        env = self.data(loop=loop)
        if extra:
            env.update(extra)
        try:
            return expr.parse(source).is_true(env)
        except expr.ExprError as exc:
            raise ExecutionError(f"step {step}: {what} {source!r}: {exc}", step=step) from None

    def evaluate(self, source: str, *, step: str, what: str, loop: LoopFrame | None) -> Any:
        try:
            return expr.parse(source).evaluate(self.data(loop=loop))
        except expr.ExprError as exc:
            raise ExecutionError(f"step {step}: {what} {source!r}: {exc}", step=step) from None


def command_env(base: Mapping[str, str], inputs: Mapping[str, Any], **extra: str) -> dict[str, str]:
    """The environment of a command: the run's env plus every input as a variable.

    Exporting inputs (`$topic`) is the injection-safe way to use them in shell commands.
    """
    env = dict(base)
    for name, value in inputs.items():
        if name.isidentifier():
            env[name] = value if isinstance(value, str) else _env_text(value)
    env.update(extra)
    return env


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """The inside of a Markdown code block that is the whole text (agents wrap JSON so)."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def json_response(text: str, *, fenced: bool = False) -> Any:
    """`.Response` of a step: its output parsed as a JSON object or array, else None.

    `fenced`: an output that is one Markdown code block is read inside it (agent replies).
    """
    stripped = (strip_fences(text) if fenced else text).strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None
