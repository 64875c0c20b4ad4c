"""How a tool call looks in one line, for every frontend: the tool's arguments shortened,
a preview of its result, and how it ended.

Chat-mode tools (`tools:` on an agent step) report each call as `ToolCallStarted` /
`ToolCallFinished` events. The terminal prints one line per call
(`⚙ Grep({"pattern": "TODO"}) → 12 matches · 0.12 s`); the notebook puts the same line in
the summary of a collapsible block. The text here is plain: each frontend makes it safe
for its medium (`terminal_safe`, HTML escaping) and adds its colours.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "ARGUMENT_CHARS",
    "PREVIEW_CHARS",
    "one_line",
    "result_lines",
    "shorten_arguments",
    "shorten_result",
]

ARGUMENT_CHARS = 60  # the arguments of a call, in its one-line form
PREVIEW_CHARS = 60  # the first line of its result

_SPACE = re.compile(r"\s+")


def one_line(text: str, limit: int) -> str:
    """`text` on one line (runs of white space made one space), cut to `limit` characters."""
    line = _SPACE.sub(" ", text).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def shorten_arguments(arguments: str, limit: int = ARGUMENT_CHARS) -> str:
    """A call's JSON arguments on one line; "" for none (`{}`), so the call reads `Glob()`.

    Valid JSON is written compactly in one way (a model may send it pretty-printed); text
    that is not JSON (a model's mistake) is shown as it came."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return one_line(arguments, limit)
    if value == {}:
        return ""
    return one_line(json.dumps(value, ensure_ascii=False), limit)


def result_lines(result: str) -> list[str]:
    """The lines of a result that say something (blank ones dropped)."""
    return [line for line in result.splitlines() if line.strip()]


def shorten_result(result: str, limit: int = PREVIEW_CHARS) -> str:
    """The first line of a result, shortened, and how many more lines there are."""
    lines = result_lines(result)
    if not lines:
        return "(no output)"
    first = one_line(lines[0], limit)
    more = len(lines) - 1
    return f"{first} (+{more} line{'s' if more > 1 else ''})" if more else first
