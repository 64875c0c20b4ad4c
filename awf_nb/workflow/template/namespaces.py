"""AWF's dot-less namespace functions: `{{inputs.x}}`, `{{states.s.Output}}`, `{{loop.index1}}`.

The function forms of `loop`, `context` and `error` spell their keys in snake_case;
`_SnakeCaseKeys` maps those spellings onto the PascalCase keys of the run data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Namespaces AWF also offers as functions (`{{inputs.x}}` for `{{.inputs.x}}`).
_NAMESPACES = ("inputs", "states", "workflow", "env", "context", "loop", "error", "awf")
# Their function forms spell keys in snake_case: `{{loop.index1}}` is `.loop.Index1`.
_SNAKE_CASE_NAMESPACES = frozenset({"loop", "context", "error"})
_NAMESPACE_HINTS = {
    "loop": "loop data exists only inside a for_each or while body",
    "error": "error data exists only in workflow_error hooks",
}


def _pascal_case(key: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in key.split("_"))


def _snake_case(key: str) -> str:
    out: list[str] = []
    for i, char in enumerate(key):
        if (
            char.isupper()
            and i
            and (
                key[i - 1].islower()
                or key[i - 1].isdigit()
                or (i + 1 < len(key) and key[i + 1].islower())
            )
        ):
            out.append("_")
        out.append(char.lower())
    return "".join(out)


class _SnakeCaseKeys(Mapping[str, Any]):
    """A PascalCase namespace as its function form shows it: `loop.index1` -> `Index1`."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: object) -> Any:
        if not isinstance(key, str):
            raise KeyError(key)
        real = self._real_key(key)
        value = self._data[real]
        if real == "Parent" and isinstance(value, Mapping):  # the enclosing loop
            return _SnakeCaseKeys(value)
        return value

    def _real_key(self, key: str) -> str:
        pascal = _pascal_case(key)
        if pascal in self._data:
            return pascal
        wanted = key.replace("_", "").lower()
        for candidate in self._data:  # `id` -> `ID`, `session_id` -> `SessionID`
            if isinstance(candidate, str) and candidate.replace("_", "").lower() == wanted:
                return candidate
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (_snake_case(k) if isinstance(k, str) else k for k in self._data)

    def __len__(self) -> int:
        return len(self._data)
