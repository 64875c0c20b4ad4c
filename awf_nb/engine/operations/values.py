"""Type checks for operation inputs after rendering.

Templates render to text, so `number: "{{.inputs.issue}}"` arrives as "42": an integer
input accepts digits, a boolean input "true"/"false", an array input a list, a JSON array
or a comma-separated list (as AWF's loop items), an object input a mapping or a JSON
object. Anything else is an error naming the operation, the input and the value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from awf_nb.errors import ExecutionError
from awf_nb.workflow.operations import OperationInput, OperationSpec

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off", ""}


def coerce_inputs(spec: OperationSpec, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs with defaults filled in and each value of its declared type."""
    values: dict[str, Any] = {}
    for name, item in spec.inputs.items():
        if name in inputs and inputs[name] is not None:
            values[name] = _coerce(spec.name, name, item, inputs[name])
        elif item.required:
            raise ExecutionError(f'operation {spec.name}: input "{name}" is required')
        elif item.default is not None:
            values[name] = item.default
    return values


def _coerce(operation: str, name: str, item: OperationInput, value: Any) -> Any:
    try:
        return _CONVERTERS[item.type](value)
    except (ValueError, TypeError):
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise ExecutionError(
            f'operation {operation}: input "{name}" must be {_ARTICLE[item.type]}, got {shown!r}'
        ) from None


def _string(value: Any) -> str:
    if isinstance(value, dict | list):
        raise TypeError
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return int(value.strip())
    raise TypeError


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError


def _array(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            parsed = json.loads(text)
            if isinstance(parsed, list):
                return parsed
            raise ValueError
        return [part.strip() for part in text.split(",") if part.strip()]
    raise TypeError


def _object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        parsed = json.loads(value)
        if isinstance(parsed, dict):
            return parsed
    raise TypeError


_CONVERTERS = {
    "string": _string,
    "integer": _integer,
    "boolean": _boolean,
    "array": _array,
    "object": _object,
}
_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
}
