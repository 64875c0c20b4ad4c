"""The state of one render: output, variables, named templates, and what errors need to say."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from awf_nb.workflow.template.errors import TemplateRenderError, _line_col
from awf_nb.workflow.template.namespaces import (
    _NAMESPACE_HINTS,
    _SNAKE_CASE_NAMESPACES,
    _SnakeCaseKeys,
)
from awf_nb.workflow.template.values import _go_quote

if TYPE_CHECKING:
    from awf_nb.workflow.template.api import Template
    from awf_nb.workflow.template.nodes import (
        _ChainOperand,
        _Command,
        _Operand,
        _Statement,
        _TemplateCall,
    )


# Bounds on one render, so a template can neither take all the memory nor run for ages
# ({{range 100000000}}, a nested range over a big list): steps are statements executed and
# range iterations; size is the characters written.
MAX_RENDER_STEPS = 2_000_000
MAX_RENDER_CHARS = 16 << 20


class _Exec:
    """The state of one render: output, variables, and what errors need to say."""

    __slots__ = (
        "base_dir", "data", "defines", "depth", "name", "out", "size", "source", "steps",
        "vars",
    )  # fmt: skip

    def __init__(self, template: Template, data: Any, base_dir: Path | None, name: str) -> None:
        self.source = template.source
        self.defines = template._defines
        self.data = data
        self.base_dir = base_dir
        self.name = name
        self.out: list[str] = []
        self.vars: list[list[Any]] = [["$", data]]
        self.depth = 0
        self.steps = 0
        self.size = 0

    def walk(self, nodes: list[_Statement], dot: Any) -> None:
        for node in nodes:
            self.tick(node)
            node.render(self, dot)

    def tick(self, node: Any) -> None:
        """Count one unit of work; past the budget the render stops with an error."""
        self.steps += 1
        if self.steps > MAX_RENDER_STEPS:
            self.fail(
                f"the template does too much work (over {MAX_RENDER_STEPS:,} steps); "
                "check its range loops",
                _located(node),
            )

    def write(self, text: str, node: Any) -> None:
        self.size += len(text)
        if self.size > MAX_RENDER_CHARS:
            self.fail(
                f"the rendered text is larger than {MAX_RENDER_CHARS >> 20} MiB", _located(node)
            )
        self.out.append(text)

    def variable(self, name: str, node: _Operand) -> Any:
        for entry in reversed(self.vars):
            if entry[0] == name:
                return entry[1]
        self.fail(f"undefined variable: {name}", node)

    def assign(self, name: str, value: Any, node: _Command) -> None:
        for entry in reversed(self.vars):
            if entry[0] == name:
                entry[1] = value
                return
        self.fail(f"undefined variable: {name}", node)

    def namespace_value(self, name: str) -> tuple[Any, str]:
        """A namespace for its function form, or the reason it is not available."""
        data = self.data
        value = data.get(name) if isinstance(data, Mapping) else None
        if value is None:
            hint = _NAMESPACE_HINTS.get(name, "the run did not provide it")
            return None, f"{_go_quote(name)} is not available here: {hint}"
        if name in _SNAKE_CASE_NAMESPACES and isinstance(value, Mapping):
            return _SnakeCaseKeys(value), ""
        return value, ""

    def namespace(self, name: str, node: _ChainOperand) -> Any:
        value, problem = self.namespace_value(name)
        if problem:
            self.fail(problem, node, field=node.field_name(self))
        return value

    def text(self, node: _Operand | _Command | _TemplateCall) -> str:
        return self.source[node.start : node.end]

    def fail(
        self, reason: str, node: _Operand | _Command | _TemplateCall, field: str = ""
    ) -> NoReturn:
        line, column = _line_col(self.source, node.start)
        snippet = " ".join(self.text(node).split())
        if len(snippet) > 60:
            snippet = snippet[:57] + "..."
        raise TemplateRenderError(
            reason, name=self.name, field=field, line=line, column=column, snippet=snippet
        )


class _Nowhere:
    start = end = 0


def _located(node: Any) -> Any:
    """`node` if it has a place in the source, else its pipeline's first command."""
    if hasattr(node, "start"):
        return node
    pipe = getattr(node, "pipe", None)
    if pipe is not None and pipe.cmds:
        return pipe.cmds[0]
    return _Nowhere()
