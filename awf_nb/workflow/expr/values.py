"""Condition values: type names for messages, numbers and booleans spelt as text, equality,
ordering and arithmetic with nil-safety.

Inputs and command output are text, so a string that looks like a number or a boolean
compares as one with a number or a boolean; nil makes ordering false and arithmetic nil.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from awf_nb.workflow.expr.errors import ExprEvalError
from awf_nb.workflow.kinds import type_word


def _is_number(value: Any) -> TypeGuard[int | float]:
    # bool is an int subclass in Python, but `true == 1` must be false, as in expr-lang.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _type_name(value: Any) -> str:
    if _is_list(value):  # the condition language's own idea of a list
        return "list"
    return type_word(value)


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
    first, second = (_number_from_text(v) if isinstance(v, str) else v for v in (left, right))
    if _is_number(first) and _is_number(second):
        return first, second
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
