"""The word for a value's type in messages, as a Go programmer (and AWF) says it:
`string`, `int`, `float`, `bool`, `list`, `map`, and `null` / `nil` for nothing (YAML
messages say `null`, conditions `nil`). The template package has its own `%T` names,
which follow Go's fmt (`[]interface {}`), a different job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def type_word(value: Any, *, none: str = "nil") -> str:
    if value is None:
        return none
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "list"
    return type(value).__name__
