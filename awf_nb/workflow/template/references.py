"""The field chains a template reads from the run data, so `awf validate` can check them
without rendering (see `Template.references`)."""

from __future__ import annotations

from dataclasses import dataclass

from awf_nb.workflow.template.errors import _line_col
from awf_nb.workflow.template.namespaces import _NAMESPACES
from awf_nb.workflow.template.nodes import (
    _Action,
    _Chain,
    _Control,
    _Field,
    _Identifier,
    _If,
    _Operand,
    _Pipe,
    _Statement,
    _SubPipe,
    _TemplateCall,
    _Variable,
)


@dataclass(frozen=True)
class FieldRef:
    """A field chain a template reads from the run data, for `awf validate`.

    `path` starts at the data root: `{{.inputs.x}}` and `{{$.inputs.x}}` give
    `("inputs", "x")`; the namespace function `{{inputs.x}}` gives the same path with
    `function_form=True` (its keys are spelled as written, e.g. `("loop", "index1")`).
    `line` and `column` (1-based) point at the start of the chain in the template source.
    """

    path: tuple[str, ...]
    line: int
    column: int
    function_form: bool = False

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


class _ReferenceCollector:
    """Finds the field chains that read the run data (see `Template.references`).

    `dot_is_root` says whether `.` is the data root where a node sits (range and with
    bodies move it; named templates get their argument), `dollar_is_root` the same for `$`.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[tuple[int, FieldRef]] = []

    def references(self) -> tuple[FieldRef, ...]:
        return tuple(ref for _, ref in sorted(self.found, key=lambda item: item[0]))

    def statements(self, nodes: list[_Statement], dot_is_root: bool, dollar_is_root: bool) -> None:
        for node in nodes:
            if isinstance(node, _Action):
                self.pipe(node.pipe, dot_is_root, dollar_is_root)
            elif isinstance(node, _Control):
                self.pipe(node.pipe, dot_is_root, dollar_is_root)
                body_dot_is_root = dot_is_root and isinstance(node, _If)
                self.statements(node.body, body_dot_is_root, dollar_is_root)
                if node.else_body is not None:  # else runs with the outer dot
                    self.statements(node.else_body, dot_is_root, dollar_is_root)
            elif isinstance(node, _TemplateCall) and node.pipe is not None:
                self.pipe(node.pipe, dot_is_root, dollar_is_root)

    def pipe(self, pipe: _Pipe, dot_is_root: bool, dollar_is_root: bool) -> None:
        for cmd in pipe.cmds:
            for arg in cmd.args:
                self.operand(arg, dot_is_root, dollar_is_root)

    def operand(self, node: _Operand, dot_is_root: bool, dollar_is_root: bool) -> None:
        if isinstance(node, _Field):
            if dot_is_root:
                self.add(node, node.path, function_form=False)
        elif isinstance(node, _Variable):
            if node.name == "$" and node.path and dollar_is_root:
                self.add(node, node.path, function_form=False)
        elif isinstance(node, _Identifier):
            if node.name in _NAMESPACES:
                self.add(node, (node.name,), function_form=True)
        elif isinstance(node, _Chain):
            base = node.base
            if isinstance(base, _Identifier) and base.name in _NAMESPACES:
                self.add(node, (base.name, *node.path), function_form=True)
            else:
                self.operand(base, dot_is_root, dollar_is_root)
        elif isinstance(node, _SubPipe):
            self.pipe(node.pipe, dot_is_root, dollar_is_root)

    def add(self, node: _Operand, path: tuple[str, ...], *, function_form: bool) -> None:
        line, column = _line_col(self.source, node.start)
        self.found.append((node.start, FieldRef(path, line, column, function_form)))
