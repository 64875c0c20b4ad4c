"""The word operators (`in`, `contains`, `startsWith`, `endsWith`, `matches`) and the
functions conditions may call (`len`, `lower`, `trim`, `int`, `string`, ...): `FUNCTIONS`."""

from __future__ import annotations

import functools
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from awf_nb.workflow.expr.errors import ExprEvalError
from awf_nb.workflow.expr.values import (
    _describe,
    _equal,
    _format_number,
    _is_list,
    _is_number,
    _number_from_text,
    _shorten,
    _type_name,
)


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
