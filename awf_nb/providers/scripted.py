"""The `scripted` provider: deterministic replies without a model (tests, demos, docs).

Options (all optional):

- `replies`: list served in order, one per turn of the step. An entry is a string (the
  reply) or `{error: "...", retryable: false, retry_after: null}` (the turn fails with a
  ProviderError). When the list is used up the turn fails with `scripted: no more replies`.
  Without `replies` the provider echoes: the reply is the prompt it received.
- `delay_ms`: pause between streamed chunks (replies stream in pieces of at most 8 chars).
- `tool_uses`: list of `{name, argument}` notices emitted before the text of every turn.
- `fail_after_chars`: stream that many characters of the reply, then fail (mid-stream).
- `context_window`: token budget (len/4 estimate); the oldest exchanges are dropped to fit,
  reported with a `Notice(truncated_turns=N)`.

The counter of served replies is kept per step; the first turn a step asks for starts at
`turn.turn_number - 1`, so a conversation restored by `awf resume` continues where it was.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from awf_nb.engine.ports import (
    Final,
    Message,
    ProviderEvent,
    TextDelta,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.errors import ProviderError
from awf_nb.providers.history import (
    build_messages,
    estimate_message_tokens,
    estimate_tokens,
    fit_to_window,
    truncation_notice,
)

CHUNK_CHARS = 8

# A word with the whitespace after it, or a run of leading whitespace.
_WORDISH = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class _Script:
    """The step's options, checked once per turn."""

    replies: list[Any] | None
    delay: float
    tool_uses: list[ToolUse]
    fail_after_chars: int | None
    context_window: int


class ScriptedProvider:
    """Serves `options.replies` in order (or echoes the prompt), streamed in small chunks."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        self._next_reply: dict[str, int] = {}  # step name -> index of its next reply

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        script = self._read_options(turn.options)
        messages, dropped = _fit(build_messages(turn), script.context_window)
        reply = turn.prompt if script.replies is None else self._take_reply(turn, script.replies)
        for tool_use in script.tool_uses:
            yield tool_use
        text = reply if script.fail_after_chars is None else reply[: script.fail_after_chars]
        for index, chunk in enumerate(split_chunks(text)):
            if index and script.delay:
                await asyncio.sleep(script.delay)
            yield TextDelta(chunk)
        if script.fail_after_chars is not None:
            raise self._mid_stream_error(len(text))
        yield Usage(
            input_tokens=estimate_message_tokens(messages),
            output_tokens=estimate_tokens(reply),
            estimated=True,
        )
        if dropped:
            yield truncation_notice(dropped, script.context_window)
        yield Final(reply)

    async def aclose(self) -> None:
        """Nothing to release; the reply counters live as long as the run."""

    def _take_reply(self, turn: TurnRequest, replies: list[Any]) -> str:
        index = self._next_reply.get(turn.step, max(turn.turn_number - 1, 0))
        self._next_reply[turn.step] = index + 1
        if index >= len(replies):
            raise ProviderError(self.name, "no more replies")
        entry = replies[index]
        if isinstance(entry, dict) and "error" in entry:
            raise self._scripted_error(entry, index)
        if isinstance(entry, str):
            return entry
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            return str(entry)
        raise ProviderError(
            self.name,
            f"options.replies[{index}] must be a string or {{error: ...}} (got {entry!r})",
        )

    def _scripted_error(self, entry: dict[str, Any], index: int) -> ProviderError:
        retry_after = entry.get("retry_after")
        if retry_after is not None and not _is_number(retry_after):
            raise ProviderError(self.name, f"options.replies[{index}].retry_after must be a number")
        return ProviderError(
            self.name,
            str(entry["error"]),
            retryable=bool(entry.get("retryable", False)),
            retry_after=float(retry_after) if retry_after is not None else None,
        )

    def _mid_stream_error(self, streamed: int) -> ProviderError:
        # Retryable on purpose: it lets tests check that the engine refuses to retry a turn
        # once text has been streamed, whatever the provider says.
        return ProviderError(
            self.name,
            f"stream failed after {streamed} characters (fail_after_chars)",
            retryable=True,
        )

    def _read_options(self, options: dict[str, Any]) -> _Script:
        fail_after = self._number_option(options, "fail_after_chars", integer=True)
        return _Script(
            replies=self._replies_option(options.get("replies")),
            delay=(self._number_option(options, "delay_ms") or 0) / 1000,
            tool_uses=self._tool_uses_option(options.get("tool_uses")),
            fail_after_chars=None if fail_after is None else int(fail_after),
            context_window=int(self._number_option(options, "context_window", integer=True) or 0),
        )

    def _replies_option(self, value: Any) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise ProviderError(
                self.name, f"options.replies must be a list (got {type(value).__name__})"
            )
        return value

    def _tool_uses_option(self, value: Any) -> list[ToolUse]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ProviderError(self.name, "options.tool_uses must be a list of {name, argument}")
        tool_uses = []
        for index, item in enumerate(value):
            if isinstance(item, str) and item:
                tool_uses.append(ToolUse(item))
            elif isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
                tool_uses.append(ToolUse(item["name"], _argument_text(item.get("argument"))))
            else:
                raise ProviderError(
                    self.name, f"options.tool_uses[{index}] must be {{name, argument}}"
                )
        return tool_uses

    def _number_option(
        self, options: dict[str, Any], key: str, *, integer: bool = False
    ) -> float | None:
        """`options[key]` as a number >= 0 (None when absent), or a clear error."""
        value = options.get(key)
        if value is None:
            return None
        wrong_type = not _is_number(value) or (integer and not float(value).is_integer())
        if wrong_type or value < 0:
            kind = "a whole number" if integer else "a number"
            raise ProviderError(self.name, f"options.{key} must be {kind} >= 0 (got {value!r})")
        return float(value)


def split_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """Word-ish pieces of at most `size` characters that join back into `text`."""
    for piece in _WORDISH.findall(text):
        for start in range(0, len(piece), size):
            yield piece[start : start + size]


def _fit(messages: list[Message], window: int) -> tuple[list[Message], int]:
    return fit_to_window(messages, window, estimate_message_tokens) if window else (messages, 0)


def _argument_text(value: Any) -> str:
    return "" if value is None else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
