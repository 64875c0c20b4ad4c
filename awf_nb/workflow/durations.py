"""Durations as workflows write them: a number of seconds, or a Go duration (`"1m30s"`) —
read by `parse_duration`, and written back by `go_duration` where a workflow reads one
(`{{.workflow.Duration}}`, as AWF renders it). What awf shows a person is the one format of
`awf_nb.engine.summary.format_duration`."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["Duration", "go_duration", "parse_duration"]

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


def go_duration(seconds: float) -> str:
    """`seconds` as Go's `time.Duration.String()` writes it, rounded to the millisecond as
    AWF's `{{.workflow.Duration}}` is: `0s`, `250ms`, `1.5s`, `2m3.04s`, `1h0m5s`.

    `parse_duration` reads it back."""
    millis = int(max(seconds, 0.0) * 1000 + 0.5)  # Go rounds halves away from zero
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, fraction = divmod(rest, 1000)
    text = f"{whole}" + (f".{fraction:03d}".rstrip("0") if fraction else "") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text
