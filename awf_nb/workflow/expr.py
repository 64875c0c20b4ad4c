"""The condition language of `when`, `while`, `break_when` and `until` (spec §7).

Conditions are expr-lang style expressions over the run's data, for example
`states.build.ExitCode == 0 and inputs.mode in ["fast", "full"]`. A condition is tokenized
and parsed once into a small AST (`parse` caches by source), then evaluated as often as a
loop needs. Nothing here calls Python's eval/compile: the evaluator knows only the operators
and functions below, so a workflow file cannot run Python.

Semantics that matter for workflows:

- a path to anything missing (`states.nope.Output`, `inputs.x.y[3]`) is nil, never an error;
- with nil, ordering and word operators are false (their `not` forms true) and arithmetic
  is nil, never an error; only `== nil` and `!= nil` look at nil itself;
- strings that look like numbers or booleans compare as such with numbers or booleans:
  inputs and command output are text, so `states.count.Output > 3` works with `"5\\n"`;
- parse errors are `ExprSyntaxError` with the 1-based column, run-time type errors are
  `ExprEvalError`; both are `ExprError`, a `ValueError`.

Operators, loosest first: `or ||`, `and &&`, `not !`, comparisons (`== != < <= > >=`,
`in`, `contains`, `startsWith`, `endsWith`, `matches`, each word operator also as
`not in`, `not contains`, ...), `+ -`, `* / %`, unary `-`, then `.field`, `[index]` and
function calls. Strings take `'…'`, `"…"` (escapes `\\n \\t \\r \\\\ \\" \\'`; any other
backslash is kept, so `'\\d+'` is the regex `\\d+`) or backticks (raw).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "FUNCTIONS",
    "ExprError",
    "ExprEvalError",
    "ExprSyntaxError",
    "Expression",
    "evaluate",
    "parse",
]

# Deeper nesting than this is refused at parse time: no real condition comes close, and it
# keeps both the recursive parser and the recursive evaluator far from Python's stack limit.
MAX_NESTING = 100


# --- errors --------------------------------------------------------------------------------


class ExprError(ValueError):
    """Any problem with a condition: its syntax or its evaluation."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ExprSyntaxError(ExprError):
    """The condition cannot be parsed; `column` is 1-based into the expression."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.column))


class ExprEvalError(ExprError):
    """The condition parsed but cannot be evaluated on this data (a type error, / by 0)."""


def _syntax_error(text: str, column: int, hint: str = "") -> ExprSyntaxError:
    message = f"{text} at column {column}"
    return ExprSyntaxError(f"{message} ({hint})" if hint else message, column)


# --- values: names, coercions, comparisons ---------------------------------------------------


def _is_number(value: Any) -> bool:
    # bool is an int subclass in Python, but `true == 1` must be false, as in expr-lang.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _type_name(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if _is_list(value):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(value: Any) -> str:
    """`string "abc"`, `int 3`, `list`: what error messages say a value was."""
    kind = _type_name(value)
    if isinstance(value, str):
        return f"{kind} {json.dumps(_shorten(value), ensure_ascii=False)}"
    if isinstance(value, bool):
        return f"{kind} {'true' if value else 'false'}"
    if _is_number(value):
        return f"{kind} {_shorten(_format_number(value))}"
    return kind


def _format_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    try:
        return str(value)
    except ValueError:  # ints beyond Python's int->str digit limit
        return "a very large number"


_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INT_TEXT = re.compile(r"[+-]?\d+", re.ASCII)


def _number_from_text(text: str) -> int | float | None:
    """The number a string spells (`" 5\\n"` → 5, `"2.5"` → 2.5), or None."""
    stripped = text.strip()
    if not _NUMBER_TEXT.fullmatch(stripped):
        return None
    try:
        if _INT_TEXT.fullmatch(stripped):
            return int(stripped)
        number = float(stripped)
    except ValueError:  # more digits than Python converts
        return None
    return number if math.isfinite(number) else None


def _bool_from_text(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def _truthy(value: Any) -> bool:
    """Truthiness of a condition's value: Python's (empty string/list/map, 0 and nil false)."""
    return bool(value)


def _equal(left: Any, right: Any) -> bool:
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, bool) or isinstance(right, bool):
        return _equal_bool(left, right)
    if _is_number(left) or _is_number(right):
        return _equal_number(left, right)
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if _is_list(left) and _is_list(right):
        return len(left) == len(right) and all(map(_equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and bool(left == right)


def _equal_bool(left: Any, right: Any) -> bool:
    if isinstance(left, bool) and isinstance(right, bool):
        return left == right
    flag, other = (left, right) if isinstance(left, bool) else (right, left)
    return isinstance(other, str) and _bool_from_text(other) == flag


def _equal_number(left: Any, right: Any) -> bool:
    if _is_number(left) and _is_number(right):
        return left == right
    number, other = (left, right) if _is_number(left) else (right, left)
    if not isinstance(other, str):
        return False
    parsed = _number_from_text(other)
    return parsed is not None and parsed == number


_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _order(op: str, left: Any, right: Any, column: int) -> bool:
    if left is None or right is None:
        return False
    if isinstance(left, str) and isinstance(right, str):
        return _ORDERINGS[op](left, right)
    numbers = _as_numbers(left, right)
    if numbers is None:
        hint = ""
        if _is_number(left) or _is_number(right):
            hint = " (only a number or a string that looks like one compares with a number)"
        raise ExprEvalError(
            f"cannot compare {_describe(left)} with {_describe(right)} using {op} "
            f"at column {column}{hint}"
        )
    return _ORDERINGS[op](*numbers)


def _as_numbers(
    left: Any, right: Any, *, text_only: bool = False
) -> tuple[int | float, int | float] | None:
    """Both operands as numbers when each is or spells one, or None.

    Two strings only count (`text_only`) where text has no meaning of its own (`- * / %`):
    `"10" < "9"` and `"1" + "2"` stay string operations.
    """
    if not (text_only or _is_number(left) or _is_number(right)):
        return None
    pair = [_number_from_text(v) if isinstance(v, str) else v for v in (left, right)]
    if all(_is_number(v) for v in pair):
        return pair[0], pair[1]
    return None


def _arithmetic(op: str, left: Any, right: Any, column: int) -> Any:
    if left is None or right is None:
        return None  # nil-safety: a missing value makes the result missing, not an error
    if op == "+" and isinstance(left, str) and isinstance(right, str):
        return left + right
    if op == "+" and _is_list(left) and _is_list(right):
        return [*left, *right]
    numbers = _as_numbers(left, right, text_only=op != "+")
    if numbers is None:
        hint = " (use string(x) to join text and numbers)" if op == "+" else ""
        raise ExprEvalError(
            f"cannot apply {op} to {_describe(left)} and {_describe(right)} "
            f"at column {column}{hint}"
        )
    x, y = numbers
    if op in ("/", "%") and y == 0:
        what = "division" if op == "/" else "modulo"
        raise ExprEvalError(f"{what} by zero at column {column}")
    try:
        return _ARITHMETIC[op](x, y)
    except OverflowError:
        raise ExprEvalError(f"number too large in {op} at column {column}") from None


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
}


def _negate(value: Any, column: int) -> Any:
    if value is None:
        return None
    number = _number_from_text(value) if isinstance(value, str) else value
    if not _is_number(number):
        raise ExprEvalError(f"cannot negate {_describe(value)} at column {column}")
    return -number


# --- word operators and functions ------------------------------------------------------------


def _contains(container: Any, item: Any, where: str) -> bool:
    """`container contains item` (also `item in container`): substring, member or map key."""
    if container is None:
        return False
    if item is None and not _is_list(container):  # only a list can hold nil
        return False
    if isinstance(container, str):
        if _is_number(item):
            item = _format_number(item)
        if not isinstance(item, str):
            raise ExprEvalError(
                f"{where}: cannot look for {_describe(item)} in a string; use a string"
            )
        return item in container
    if _is_list(container):
        return any(_equal(member, item) for member in container)
    if isinstance(container, Mapping):
        return any(_equal(key, item) for key in container)
    raise ExprEvalError(f"{where} needs a string, list or map, got {_describe(container)}")


def _text_pair(left: Any, right: Any, where: str) -> tuple[str, str] | None:
    """Both operands as strings, None when either is nil, or an error naming the types."""
    if left is None or right is None:
        return None
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    raise ExprEvalError(f"{where} needs two strings, got {_describe(left)} and {_describe(right)}")


def _starts_with(text: Any, prefix: Any, where: str) -> bool:
    pair = _text_pair(text, prefix, where)
    return pair is not None and pair[0].startswith(pair[1])


def _ends_with(text: Any, suffix: Any, where: str) -> bool:
    pair = _text_pair(text, suffix, where)
    return pair is not None and pair[0].endswith(pair[1])


@functools.lru_cache(maxsize=256)
def _compile_regex(pattern: str) -> re.Pattern[str]:
    # `re` warns (FutureWarning) about some patterns; a condition has nowhere to show that
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.compile(pattern)


def _regex_problem(pattern: str) -> str | None:
    """Why `pattern` is not a valid regular expression, or None when it is."""
    try:
        _compile_regex(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        return f"invalid regular expression {json.dumps(_shorten(pattern))}: {exc}"
    return None


def _matches(text: Any, pattern: Any, where: str) -> bool:
    pair = _text_pair(text, pattern, where)
    if pair is None:
        return False
    problem = _regex_problem(pair[1])
    if problem:
        raise ExprEvalError(f"{where}: {problem}")
    return _compile_regex(pair[1]).search(pair[0]) is not None


def _word_operator(op: str, left: Any, right: Any, column: int) -> bool:
    where = f"{op} at column {column}"
    if op == "in":
        return _contains(right, left, where)
    if op == "contains":
        return _contains(left, right, where)
    if op == "startsWith":
        return _starts_with(left, right, where)
    if op == "endsWith":
        return _ends_with(left, right, where)
    return _matches(left, right, where)


def _fn_len(where: str, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str | Mapping) or _is_list(value):
        return len(value)
    raise ExprEvalError(f"{where} needs a string, list or map, got {_describe(value)}")


def _string_function(transform: Callable[[str], str]) -> Callable[..., Any]:
    def apply(where: str, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ExprEvalError(f"{where} needs a string, got {_describe(value)}")
        return transform(value)

    return apply


def _fn_trim(where: str, value: Any, chars: Any = None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not (chars is None or isinstance(chars, str)):
        got = _describe(value) if chars is None else f"{_describe(value)} and {_describe(chars)}"
        raise ExprEvalError(f"{where} needs strings, got {got}")
    return value.strip(chars)


def _to_number(where: str, value: Any) -> int | float:
    if isinstance(value, bool):
        return int(value)
    number = _number_from_text(value) if isinstance(value, str) else value
    # math.isfinite only for floats: it cannot convert ints beyond the float range
    if not _is_number(number) or (isinstance(number, float) and not math.isfinite(number)):
        raise ExprEvalError(f"{where} cannot convert {_describe(value)} to a number")
    return number


def _fn_int(where: str, value: Any) -> int | None:
    return None if value is None else int(_to_number(where, value))


def _fn_float(where: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(_to_number(where, value))
    except OverflowError:
        raise ExprEvalError(f"{where}: number too large for a float") from None


def _fn_string(where: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return _format_number(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # odd keys, cycles, huge ints
        return f"<{_type_name(value)}>"


@dataclass(frozen=True)
class Function:
    """A function conditions may call: its arity and its implementation.

    `impl` receives a `where` text for error messages (`len() at column 3`) then the
    evaluated arguments.
    """

    name: str
    min_args: int
    max_args: int
    impl: Callable[..., Any]

    def arity_text(self) -> str:
        if self.min_args == self.max_args:
            plural = "" if self.min_args == 1 else "s"
            return f"{self.min_args} argument{plural}"
        return f"{self.min_args} or {self.max_args} arguments"


def _function_table() -> dict[str, Function]:
    def pair(op: Callable[[Any, Any, str], bool]) -> Callable[..., bool]:
        return lambda where, a, b: op(a, b, where)

    specs: list[tuple[str, int, int, Callable[..., Any]]] = [
        ("len", 1, 1, _fn_len),
        ("lower", 1, 1, _string_function(str.lower)),
        ("upper", 1, 1, _string_function(str.upper)),
        ("trim", 1, 2, _fn_trim),
        ("int", 1, 1, _fn_int),
        ("float", 1, 1, _fn_float),
        ("string", 1, 1, _fn_string),
        ("contains", 2, 2, pair(_contains)),
        ("has_prefix", 2, 2, pair(_starts_with)),
        ("has_suffix", 2, 2, pair(_ends_with)),
        # expr-lang's own spellings, so conditions copied from its docs work too
        ("hasPrefix", 2, 2, pair(_starts_with)),
        ("hasSuffix", 2, 2, pair(_ends_with)),
    ]
    return {name: Function(name, lo, hi, impl) for name, lo, hi, impl in specs}


FUNCTIONS: Mapping[str, Function] = MappingProxyType(_function_table())


# --- paths -----------------------------------------------------------------------------------


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


# --- tokens ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    kind: str  # "number" | "string" | "name" | "op" | "end"
    value: Any
    column: int
    text: str  # as written, for error messages

    def shown(self) -> str:
        return json.dumps(_shorten(self.text), ensure_ascii=False)


_TWO_CHAR_OPS = frozenset({"==", "!=", "<=", ">=", "&&", "||"})
_ONE_CHAR_OPS = frozenset("<>!+-*/%()[],.")
_CHARACTER_HINTS = {
    "=": "use == to compare",
    "&": "use && or and",
    "|": "use || or or",
    "?": "conditions have no ?: operator; use and/or",
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "`": "`"}
_DIGITS = frozenset("0123456789")


def _is_name_start(char: str) -> bool:
    return char.isalpha() or char == "_"


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char == "_"


class _Lexer:
    """Turns a condition's text into tokens, each with its 1-based column."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0

    def tokens(self) -> list[Token]:
        found: list[Token] = []
        while True:
            self._skip_space()
            if self.pos >= len(self.source):
                found.append(Token("end", None, self.pos + 1, ""))
                return found
            found.append(self._next())

    def _skip_space(self) -> None:
        while self.pos < len(self.source) and self.source[self.pos].isspace():
            self.pos += 1

    def _next(self) -> Token:
        start, char = self.pos, self.source[self.pos]
        if char in "'\"":
            return self._string(start, char)
        if char == "`":
            return self._raw_string(start)
        if char in _DIGITS:
            return self._number(start)
        if _is_name_start(char):
            return self._name(start)
        pair = self.source[start : start + 2]
        if pair == "{{":
            raise _syntax_error(
                "template braces {{ in a condition", start + 1, _template_hint(self.source)
            )
        if pair in _TWO_CHAR_OPS:
            self.pos += 2
            return Token("op", pair, start + 1, pair)
        if char in _ONE_CHAR_OPS:
            self.pos += 1
            return Token("op", char, start + 1, char)
        shown = json.dumps(char, ensure_ascii=False)
        raise _syntax_error(
            f"unexpected character {shown}", start + 1, _CHARACTER_HINTS.get(char, "")
        )

    def _string(self, start: int, quote: str) -> Token:
        chars: list[str] = []
        pos = start + 1
        while pos < len(self.source):
            char = self.source[pos]
            if char == quote:
                self.pos = pos + 1
                return Token("string", "".join(chars), start + 1, self.source[start : pos + 1])
            if char == "\\" and pos + 1 < len(self.source):
                escaped = self.source[pos + 1]
                # an unknown escape keeps its backslash, so regexes like '\d+' work unescaped
                chars.append(_ESCAPES.get(escaped, "\\" + escaped))
                pos += 2
                continue
            chars.append(char)
            pos += 1
        raise _syntax_error("unterminated string starting", start + 1)

    def _raw_string(self, start: int) -> Token:
        end = self.source.find("`", start + 1)
        if end < 0:
            raise _syntax_error("unterminated string starting", start + 1)
        self.pos = end + 1
        return Token(
            "string", self.source[start + 1 : end], start + 1, self.source[start : end + 1]
        )

    def _scan_digits(self, pos: int) -> int:
        while pos < len(self.source) and (self.source[pos] in _DIGITS or self.source[pos] == "_"):
            pos += 1
        return pos

    def _number(self, start: int) -> Token:
        source = self.source
        pos = self._scan_digits(start)
        is_float = False
        # `1.5` is a float, but `1.x` is the field x of 1 (nil), as in a path
        if source[pos : pos + 1] == "." and source[pos + 1 : pos + 2] in _DIGITS:
            pos, is_float = self._scan_digits(pos + 1), True
        if source[pos : pos + 1] in ("e", "E"):
            exponent = pos + 1
            if source[exponent : exponent + 1] in ("+", "-"):
                exponent += 1
            if source[exponent : exponent + 1] in _DIGITS:
                pos, is_float = self._scan_digits(exponent), True
        end = pos
        while end < len(source) and _is_name_char(source[end]):
            end += 1
        text = source[start:end]
        if end > pos:
            raise _syntax_error(f"invalid number {json.dumps(_shorten(text))}", start + 1)
        try:
            value: int | float = float(text) if is_float else int(text)
        except ValueError:  # misplaced `_`, or more digits than Python converts
            raise _syntax_error(f"invalid number {json.dumps(_shorten(text))}", start + 1) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise _syntax_error(f"number too large {json.dumps(_shorten(text))}", start + 1)
        self.pos = pos
        return Token("number", value, start + 1, text)

    def _name(self, start: int) -> Token:
        pos = start + 1
        while pos < len(self.source) and _is_name_char(self.source[pos]):
            pos += 1
        self.pos = pos
        text = self.source[start:pos]
        return Token("name", text, start + 1, text)


def _template_hint(source: str) -> str:
    """Explain that conditions are not templates, with the user's condition rewritten."""
    general = "conditions take plain expressions like `states.build.ExitCode == 0`, not templates"
    plain = source
    for marker, replacement in (
        ("{{-", "{{"),
        ("-}}", "}}"),
        ("{{ ", "{{"),
        (" }}", "}}"),
        ("{{.", "{{"),
    ):
        while marker in plain:
            plain = plain.replace(marker, replacement)
    plain = plain.replace("{{", "").replace("}}", "").strip()
    try:
        parse(plain)
    except (ExprSyntaxError, RecursionError):
        return general
    return f"{general}: write `{plain}`"


# --- the parser ------------------------------------------------------------------------------

# Binding powers, loosest first; `not` is looser than comparisons: `not a == b` is `not (a == b)`.
_OR, _AND, _NOT, _COMPARE, _ADD, _MULTIPLY, _UNARY = range(1, 8)

_SYMBOL_OPERATORS = {
    "||": ("or", _OR),
    "&&": ("and", _AND),
    "==": ("==", _COMPARE),
    "!=": ("!=", _COMPARE),
    "<": ("<", _COMPARE),
    "<=": ("<=", _COMPARE),
    ">": (">", _COMPARE),
    ">=": (">=", _COMPARE),
    "+": ("+", _ADD),
    "-": ("-", _ADD),
    "*": ("*", _MULTIPLY),
    "/": ("/", _MULTIPLY),
    "%": ("%", _MULTIPLY),
}
_WORD_OPERATORS = frozenset({"in", "contains", "startsWith", "endsWith", "matches"})
_LITERAL_WORDS = {"true": True, "false": False, "nil": None}
_RESERVED = frozenset({"and", "or", "not", *_WORD_OPERATORS, *_LITERAL_WORDS})


@dataclass(frozen=True)
class _Infix:
    op: str
    power: int
    width: int  # tokens it spans: 2 for `not in`
    column: int
    negated: bool = False


class _Parser:
    """Precedence climbing over the token list; builds the AST or raises ExprSyntaxError."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = _Lexer(source).tokens()
        self.pos = 0
        self.nesting = 0

    def parse(self) -> Node:
        if self.tokens[0].kind == "end":
            raise _syntax_error(
                "empty condition", 1, "write an expression like `states.build.ExitCode == 0`"
            )
        node = self.expression(0)
        if self.peek().kind != "end":
            raise self.unexpected(self.peek())
        return node

    # -- token helpers

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.pos += 1
        return token

    def is_op(self, value: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.value == value

    def unexpected(self, token: Token, hint: str = "") -> ExprSyntaxError:
        if token.kind == "end":
            return _syntax_error("unexpected end of expression", token.column, hint)
        return _syntax_error(f"unexpected token {token.shown()}", token.column, hint)

    def expect_closing(self, closer: str, opener: Token) -> None:
        if self.is_op(closer):
            self.advance()
            return
        hint = f'expected "{closer}" to close "{opener.text}" at column {opener.column}'
        raise self.unexpected(self.peek(), hint)

    # -- expressions

    def expression(self, min_power: int) -> Node:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise _syntax_error(
                f"expression nested too deeply (more than {MAX_NESTING} levels)",
                self.peek().column,
            )
        try:
            return self._climb(self.prefix(), min_power)
        finally:
            self.nesting -= 1

    def _climb(self, left: Node, min_power: int) -> Node:
        while (infix := self.infix()) is not None and infix.power >= min_power:
            if infix.op in ("and", "or"):
                left = self._logical(left, infix)
            else:
                left = self._chain(left, infix)
        return left

    def _logical(self, first: Node, infix: _Infix) -> Node:
        operands = [first]
        while (more := self.infix()) is not None and more.op == infix.op:
            self.pos += more.width
            operands.append(self.expression(infix.power + 1))
        return Logical(infix.op, tuple(operands), first.column)

    def _chain(self, first: Node, infix: _Infix) -> Node:
        links: list[Operation] = []
        while (more := self.infix()) is not None and more.power == infix.power:
            self.pos += more.width
            right = self.expression(more.power + 1)
            if more.op == "matches":
                self._check_literal_regex(right)
            links.append(Operation(more.op, right, more.column, more.negated))
        return Chain(first, tuple(links), first.column)

    def _check_literal_regex(self, pattern: Node) -> None:
        if isinstance(pattern, Literal) and isinstance(pattern.value, str):
            problem = _regex_problem(pattern.value)
            if problem:
                raise _syntax_error(problem, pattern.column)

    def infix(self) -> _Infix | None:
        """The binary operator at the current token, without consuming it."""
        token = self.peek()
        if token.kind == "op" and token.value in _SYMBOL_OPERATORS:
            op, power = _SYMBOL_OPERATORS[token.value]
            return _Infix(op, power, 1, token.column)
        if token.kind != "name":
            return None
        if token.value in ("and", "or"):
            return _Infix(token.value, _OR if token.value == "or" else _AND, 1, token.column)
        if token.value in _WORD_OPERATORS:
            return _Infix(token.value, _COMPARE, 1, token.column)
        following = self.peek(1)
        if token.value == "not" and following.kind == "name" and following.value in _WORD_OPERATORS:
            return _Infix(following.value, _COMPARE, 2, token.column, negated=True)
        return None

    def prefix(self) -> Node:
        token = self.peek()
        if (token.kind == "name" and token.value == "not") or self.is_op("!"):
            self.advance()
            return Unary("not", self.expression(_NOT), token.column)
        if self.is_op("-"):
            self.advance()
            return Unary("-", self.expression(_UNARY), token.column)
        return self.postfix(self.primary())

    def primary(self) -> Node:
        token = self.advance()
        if token.kind in ("number", "string"):
            return Literal(token.value, token.column)
        if token.kind == "name":
            return self.named(token)
        if token.kind == "op" and token.value == "(":
            inner = self.expression(0)
            self.expect_closing(")", token)
            return inner
        if token.kind == "op" and token.value == "[":
            return ListLiteral(tuple(self.items("]", token)), token.column)
        if token.kind == "op" and token.value == ".":
            raise self.unexpected(token, "paths have no leading dot: `states.build.ExitCode`")
        raise self.unexpected(token)

    def named(self, token: Token) -> Node:
        word = token.value
        if self.is_op("("):
            return self.call(token)
        if word in _LITERAL_WORDS:
            return Literal(_LITERAL_WORDS[word], token.column)
        if word in _RESERVED:
            raise self.unexpected(token)
        return Name(word, token.column)

    def call(self, token: Token) -> Node:
        name = token.value
        function = FUNCTIONS.get(name)
        if function is None:
            raise _syntax_error(
                f"unknown function {json.dumps(name, ensure_ascii=False)}",
                token.column,
                _function_hint(name),
            )
        opener = self.advance()
        args = self.items(")", opener)
        if not function.min_args <= len(args) <= function.max_args:
            raise _syntax_error(
                f"{name}() takes {function.arity_text()}, got {len(args)}", token.column
            )
        return Call(function, tuple(args), token.column)

    def items(self, closer: str, opener: Token) -> list[Node]:
        """Comma-separated expressions up to `closer`; a trailing comma is allowed."""
        found: list[Node] = []
        while not self.is_op(closer):
            found.append(self.expression(0))
            if not self.is_op(","):
                break
            self.advance()
        self.expect_closing(closer, opener)
        return found

    def postfix(self, target: Node) -> Node:
        steps: list[FieldStep | IndexStep] = []
        while True:
            token = self.peek()
            if self.is_op("."):
                self.advance()
                steps.append(FieldStep(self.field_name(), token.column))
            elif self.is_op("["):
                self.advance()
                index = self.expression(0)
                self.expect_closing("]", token)
                steps.append(IndexStep(index, token.column))
            elif self.is_op("("):
                raise self.unexpected(
                    token, f"only functions can be called: {', '.join(sorted(FUNCTIONS))}"
                )
            else:
                break
        return Access(target, tuple(steps), target.column) if steps else target

    def field_name(self) -> str:
        token = self.peek()
        if token.kind != "name":  # any word is a field name after a dot, even `in` or `nil`
            raise self.unexpected(token, 'expected a field name after "."')
        self.advance()
        return token.value


def _function_hint(name: str) -> str:
    import difflib  # only a misspelt function pays for it

    close = difflib.get_close_matches(name, FUNCTIONS, n=1)
    known = ", ".join(sorted(FUNCTIONS))
    return f"did you mean {close[0]}? functions: {known}" if close else f"functions: {known}"


# --- public API ------------------------------------------------------------------------------


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
