"""The public entry points: `Expression` (a parsed condition), `parse` (cached) and
`evaluate`."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from awf_nb.workflow.expr.errors import ExprEvalError
from awf_nb.workflow.expr.nodes import (
    Access,
    Call,
    Chain,
    IndexStep,
    ListLiteral,
    Logical,
    Name,
    Node,
    Unary,
)
from awf_nb.workflow.expr.parser import _Parser
from awf_nb.workflow.expr.values import _truthy


@dataclass(frozen=True)
class Expression:
    """A parsed condition: evaluate it against a run's data as often as needed."""

    source: str
    _root: Node = field(repr=False, compare=False)
    _references: tuple[tuple[str, ...], ...] = field(repr=False, compare=False)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The condition's value; raises ExprEvalError on a type error or a division by 0."""
        if not isinstance(env, Mapping):
            raise TypeError(f"a condition's environment must be a mapping, got {type(env)}")
        try:
            return self._root.evaluate(env)
        except RecursionError:  # only self-nested data gets here: the AST depth is bounded
            raise ExprEvalError("the data compared is nested too deeply") from None

    def is_true(self, env: Mapping[str, Any]) -> bool:
        """Whether the condition holds (Python truthiness of `evaluate`)."""
        return _truthy(self.evaluate(env))

    def references(self) -> list[tuple[str, ...]]:
        """Every path the condition reads, in source order, without duplicates."""
        return list(self._references)

    def names(self) -> list[tuple[str, int]]:
        """Every top-level name the condition reads (`turn` of `turn >= 2`, `states` of
        `states.x.Output`) with its 1-based column, in source order: what a validator
        compares with the names the condition's scope holds."""
        return list(_names(self._root))


def _names(node: Node) -> Iterator[tuple[str, int]]:
    # Every kind of node by name (depth bounded by the parser's MAX_NESTING).
    if isinstance(node, Name):
        yield node.name, node.column
    elif isinstance(node, Access):
        yield from _names(node.target)
        for step in node.steps:
            if isinstance(step, IndexStep):
                yield from _names(step.index)
    elif isinstance(node, Chain):
        yield from _names(node.first)
        for link in node.rest:
            yield from _names(link.right)
    elif isinstance(node, Unary):
        yield from _names(node.operand)
    else:
        children = node.operands if isinstance(node, Logical) else ()
        children = node.args if isinstance(node, Call) else children
        children = node.items if isinstance(node, ListLiteral) else children
        for child in children:
            yield from _names(child)


def _unique(paths: Sequence[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    return tuple(dict.fromkeys(paths))


@functools.lru_cache(maxsize=1024)
def parse(source: str) -> Expression:
    """Parse a condition once (cached by source); raises ExprSyntaxError with the column."""
    if not isinstance(source, str):
        raise TypeError(f"a condition must be a string, got {type(source).__name__}")
    root = _Parser(source).parse()
    return Expression(source, root, _unique(list(root.paths())))


def evaluate(source: str, env: Mapping[str, Any]) -> Any:
    """Parse (cached) and evaluate a condition in one call."""
    return parse(source).evaluate(env)
