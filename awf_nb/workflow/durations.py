"""Durations as workflows write them: a number of seconds, or a Go duration (`"1m30s"`)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["Duration", "parse_duration"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: Any) -> float | None:
    """Parse a Go duration (`"1m30s"`, `"500ms"`) or a number of seconds into seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: use a number of seconds or '30s'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"invalid duration {value!r}: must not be negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        pos, total = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            pos = match.end()
        if pos == len(text) and text:
            return total
    raise ValueError(
        f"invalid duration {value!r}: use a number of seconds or a Go duration like '1m30s'"
    )


Duration = Annotated[float | None, BeforeValidator(parse_duration)]
