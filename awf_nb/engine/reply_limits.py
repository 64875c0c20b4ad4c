"""What one reply may stream: the bounds every provider's reply is held to.

A model server or an agent CLI is untrusted: one that never stops, or sends endless tool
calls, must not take the machine's memory or disk. A reply is bounded in bytes
(`options.max_reply_bytes`: its text, reasoning, tool-call names and arguments, and the
tools an agent CLI reports, all counted together) and in tool calls
(`options.max_tool_calls`). The engine checks every event it receives against them
(agent.py); a provider that gathers pieces before it hands over an event (streamed tool
calls) checks them too, with the bounds the turn request carries, so nothing grows past
them unseen. Numbers a server reports (token usage) and JSON it nests are checked here as
well: they are data, never a reason to crash.
"""

from __future__ import annotations

import math
import re
from typing import Any

from awf_nb.errors import ExecutionError

DEFAULT_MAX_REPLY_BYTES = 4 << 20
DEFAULT_MAX_TOOL_CALLS = 256
# JSON nested deeper than this (tool-call arguments, a stream event) is refused: nothing a
# model means is that deep, and Python's parser gives up (RecursionError) around 1,000.
MAX_JSON_DEPTH = 100
# Token counts are JSON numbers: above 2**53 they stop being exact anywhere.
MAX_TOKEN_COUNT = 2**53


def reply_bytes_message(limit: int) -> str:
    return (
        f"the reply is longer than {limit} bytes (options.max_reply_bytes); "
        "the text received so far is kept"
    )


def tool_calls_message(limit: int) -> str:
    return (
        f"the reply asks for more than {limit} tool calls (options.max_tool_calls); "
        "the text received so far is kept"
    )


def limit_option(options: dict[str, Any], key: str, default: int, step: str) -> int:
    """Pop the engine's option `key` from a step's provider `options` (validated)."""
    value = options.pop(key, None)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExecutionError(
            f"step {step}: options.{key} must be a whole number >= 1 (got {value!r})",
            step=step,
        )
    return value


def text_bytes(text: str) -> int:
    """The UTF-8 size of `text` (ASCII, the usual case, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON `text` nests arrays and objects deeper than `limit` (checked
    without parsing it, so that the parser never recurses that deep). Text with no more
    brackets than `limit` — nearly all of it — is answered by counting alone."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def token_count(value: Any) -> int | None:
    """A reported token count as a whole number; None when it is a number no server could
    mean: negative, fractional, not finite (`NaN`, `Infinity`, `1e400`) or above
    `MAX_TOKEN_COUNT`. What is not a number at all (missing, null, text) counts as 0, as a
    server that reports no usage."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    return value if 0 <= value <= MAX_TOKEN_COUNT else None
