"""Which template actions paste untrusted text into a shell command unprotected.

Works on the parsed template, not on its text: every action that prints something is
looked at with the shell quoting its surrounding command text puts it in.

- An action reading `inputs` (but typed integer/boolean ones) or `states` (a step's output,
  an agent's reply) is untrusted.
- It is safe only when its last function is `escape` (which single-quotes the value) *and*
  it stands outside any quotes in the command: inside "..." or '...' the value's own quotes
  end the quoting, so `"{{.inputs.x | escape}}"` is injectable.
- `{{printf "%s" .inputs.x}}`, `{{index .inputs "x"}}` and `{{.states.ask.Output}}` are
  caught like `{{.inputs.x}}`: what is read counts, not how it is spelled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from awf_nb.workflow.template.errors import _line_col
from awf_nb.workflow.template.nodes import (
    _Action,
    _Control,
    _Identifier,
    _Pipe,
    _Statement,
    _Text,
)
from awf_nb.workflow.template.references import FieldRef, _ReferenceCollector

Quoting = Literal["none", "single", "double"]
UNTRUSTED = ("inputs", "states")
# Step properties that are numbers or a fixed word: nothing to inject.
SAFE_STATE_PROPERTIES = frozenset(
    {"ExitCode", "Status", "TokensUsed", "TokensInput", "TokensOutput", "TokensEstimated"}
)


@dataclass(frozen=True)
class Finding:
    """One unprotected action: what it reads (the first untrusted reference) and why."""

    ref: FieldRef
    reason: Literal["unescaped", "quoted"]
    line: int
    column: int


def unsafe_actions(source: str, nodes: list[_Statement]) -> list[Finding]:
    scanner = _Scanner(source)
    scanner.statements(nodes)
    return scanner.findings


class _Scanner:
    def __init__(self, source: str) -> None:
        self.source = source
        self.quoting: Quoting = "none"
        self.findings: list[Finding] = []

    def statements(self, nodes: list[_Statement]) -> None:
        for node in nodes:
            if isinstance(node, _Text):
                self.quoting = _after(node.text, self.quoting)
            elif isinstance(node, _Action) and not node.pipe.decl:
                self.action(node.pipe)
            elif isinstance(node, _Control):
                self.statements(node.body)
                if node.else_body is not None:
                    self.statements(node.else_body)

    def action(self, pipe: _Pipe) -> None:
        refs = list(_untrusted(self.source, pipe))
        if not refs:
            return
        escaped = _ends_in_escape(pipe)
        if escaped and self.quoting == "none":
            return
        line, column = _line_col(self.source, pipe.cmds[0].start)
        reason: Literal["unescaped", "quoted"] = "quoted" if escaped else "unescaped"
        self.findings.append(Finding(refs[0], reason, line, column))


def _untrusted(source: str, pipe: _Pipe) -> Iterator[FieldRef]:
    collector = _ReferenceCollector(source)
    collector.pipe(pipe, dot_is_root=True, dollar_is_root=True)
    for ref in collector.references():
        path = ref.path
        if not path or path[0] not in UNTRUSTED:
            continue
        if path[0] == "states" and len(path) > 2 and path[2] in SAFE_STATE_PROPERTIES:
            continue
        yield ref


def _ends_in_escape(pipe: _Pipe) -> bool:
    """`{{x | escape}}` or `{{escape x}}`: the printed value is the escaped one."""
    last = pipe.cmds[-1].args[0]
    return isinstance(last, _Identifier) and last.name == "escape"


def _after(text: str, quoting: Quoting) -> Quoting:
    """The shell's quoting state after reading `text` in state `quoting`."""
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif quoting == "single":
            if char == "'":
                quoting = "none"
        elif char == "\\":
            escaped = True
        elif quoting == "double":
            if char == '"':
                quoting = "none"
        elif char == "'":
            quoting = "single"
        elif char == '"':
            quoting = "double"
    return quoting
