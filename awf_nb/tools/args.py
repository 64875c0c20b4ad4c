"""Reading a tool call's arguments: what a model sent, checked, or a `ToolError` saying why not.

Models get types slightly wrong (`"20"` for 20, `"true"` for true); such values are
accepted when their meaning is plain, since refusing them costs a whole model round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from awf_nb.tools.output import ToolError


def string(args: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if value is None:
        raise ToolError(f"missing argument: {key}")
    if not isinstance(value, str):
        raise ToolError(f"{key} must be a string")
    if not value and not allow_empty:
        raise ToolError(f"{key} must not be empty")
    return value


def optional_string(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"{key} must be a string")
    return value


def integer(
    args: Mapping[str, Any], key: str, *, default: int | None, minimum: int | None = None
) -> int | None:
    value = args.get(key)
    if value is None or value == "":
        return default
    number = as_integer(value)
    if number is None:
        raise ToolError(f"{key} must be an integer")
    if minimum is not None and number < minimum:
        raise ToolError(f"{key} must be at least {minimum}")
    return number


def truthy(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key)
    if value is None:
        return False
    flag = as_boolean(value)
    if flag is None:
        raise ToolError(f"{key} must be true or false")
    return flag


def as_integer(value: Any) -> int | None:
    """`value` as an int when it plainly is one (5, 5.0, "5"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def as_number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def as_boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None
