"""The condition AST: each node evaluates itself against the run's data and lists the
paths it reads; paths (`a.b[0]`) are nil-safe."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from awf_nb.workflow.expr.functions import Function, _word_operator
from awf_nb.workflow.expr.values import (
    _ARITHMETIC,
    _ORDERINGS,
    _arithmetic,
    _equal,
    _is_list,
    _negate,
    _order,
    _truthy,
)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else None


def _index(value: Any, key: Any) -> Any:
    """`value[key]`; anything missing or of the wrong kind is nil (paths are nil-safe)."""
    if isinstance(value, Mapping):
        try:
            return value.get(key)
        except TypeError:  # an unhashable key (a list) cannot be in a map
            return None
    if isinstance(value, str) or _is_list(value):
        if isinstance(key, float) and key.is_integer():
            key = int(key)
        if isinstance(key, bool) or not isinstance(key, int):
            return None
        # negative indexes count from the end, as in expr-lang
        return value[key] if -len(value) <= key < len(value) else None
    return None


# --- the AST ---------------------------------------------------------------------------------
#
# Every node evaluates itself and lists the paths it reads. Left-associative chains
# (`a + b - c`, `a or b or c`) and postfix chains (`a.b[0].c`) are flat tuples, not nested
# nodes, so a long chain costs no recursion depth.


class Node(ABC):
    """An AST node: `evaluate(env)` and `paths()` in source order."""

    column: int

    @abstractmethod
    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The node's value in `env`."""

    def paths(self) -> Iterator[tuple[str, ...]]:
        return iter(())


@dataclass(frozen=True)
class Literal(Node):
    value: Any
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return self.value


@dataclass(frozen=True)
class ListLiteral(Node):
    items: tuple[Node, ...]
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return [item.evaluate(env) for item in self.items]

    def paths(self) -> Iterator[tuple[str, ...]]:
        for item in self.items:
            yield from item.paths()


@dataclass(frozen=True)
class Name(Node):
    """A top-level name (`inputs`, `response`); unknown names are nil."""

    name: str
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return env.get(self.name)

    def paths(self) -> Iterator[tuple[str, ...]]:
        yield (self.name,)


@dataclass(frozen=True)
class FieldStep:
    name: str
    column: int


@dataclass(frozen=True)
class IndexStep:
    index: Node
    column: int

    def constant_key(self) -> str | None:
        """The key when it is a string literal (`a["b"]` reads the path a.b)."""
        if isinstance(self.index, Literal) and isinstance(self.index.value, str):
            return self.index.value
        return None


@dataclass(frozen=True)
class Access(Node):
    """`target.field[index]...`: a postfix chain, evaluated left to right, nil-safe."""

    target: Node
    steps: tuple[FieldStep | IndexStep, ...]
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        value = self.target.evaluate(env)
        for step in self.steps:
            if isinstance(step, FieldStep):
                value = _field(value, step.name)
            else:
                value = _index(value, step.index.evaluate(env))
        return value

    def paths(self) -> Iterator[tuple[str, ...]]:
        if not isinstance(self.target, Name):
            yield from self.target.paths()
        path = [self.target.name] if isinstance(self.target, Name) else []
        extending = bool(path)
        for step in self.steps:
            key = step.name if isinstance(step, FieldStep) else step.constant_key()
            if extending and key is not None:
                path.append(key)
            else:
                extending = False
        if path:
            yield tuple(path)
        for step in self.steps:
            if isinstance(step, IndexStep):
                yield from step.index.paths()


@dataclass(frozen=True)
class Call(Node):
    function: Function
    args: tuple[Node, ...]
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        values = [arg.evaluate(env) for arg in self.args]
        return self.function.impl(f"{self.function.name}() at column {self.column}", *values)

    def paths(self) -> Iterator[tuple[str, ...]]:
        for arg in self.args:
            yield from arg.paths()


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "not" or "-"
    operand: Node
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        value = self.operand.evaluate(env)
        if self.op == "not":
            return not _truthy(value)
        return _negate(value, self.column)

    def paths(self) -> Iterator[tuple[str, ...]]:
        return self.operand.paths()


@dataclass(frozen=True)
class Logical(Node):
    """`a and b and c` / `a or b or c`, short-circuit, always a bool."""

    op: str  # "and" or "or"
    operands: tuple[Node, ...]
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> bool:
        stop_at = self.op == "or"  # `or` stops at the first true operand, `and` at a false one
        for operand in self.operands:
            if _truthy(operand.evaluate(env)) is stop_at:
                return stop_at
        return not stop_at

    def paths(self) -> Iterator[tuple[str, ...]]:
        for operand in self.operands:
            yield from operand.paths()


@dataclass(frozen=True)
class Operation:
    """One `op right` link of a chain; `negated` is the `not` of `not in`/`not matches`."""

    op: str
    right: Node
    column: int
    negated: bool = False


@dataclass(frozen=True)
class Chain(Node):
    """`first op right op right ...` at one precedence level, applied left to right."""

    first: Node
    rest: tuple[Operation, ...]
    column: int

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        value = self.first.evaluate(env)
        for link in self.rest:
            value = _apply(link, value, link.right.evaluate(env))
        return value

    def paths(self) -> Iterator[tuple[str, ...]]:
        yield from self.first.paths()
        for link in self.rest:
            yield from link.right.paths()


def _apply(link: Operation, left: Any, right: Any) -> Any:
    op = link.op
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    if op in _ORDERINGS:
        return _order(op, left, right, link.column)
    if op in _ARITHMETIC:
        return _arithmetic(op, left, right, link.column)
    result = _word_operator(op, left, right, link.column)
    return not result if link.negated else result
