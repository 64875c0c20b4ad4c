"""The public entry points: `Expression` (a parsed condition), `parse` (cached) and
`evaluate`."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from awf_nb.workflow.expr.errors import ExprEvalError
from awf_nb.workflow.expr.nodes import Node
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
