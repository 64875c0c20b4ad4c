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

The counter of served replies is kept per step and speaker (a conversation partner on the
scripted provider has its own list); the first turn a step asks for starts at
`turn.turn_number - 1`, so a conversation restored by `awf resume` continues where it was.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

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
from awf_nb.providers.options import OptionsModel, parse_options

CHUNK_CHARS = 8

# A word with the whitespace after it, or a run of leading whitespace.
_WORDISH = re.compile(r"\S+\s*|\s+")


class ScriptedError(OptionsModel):
    """A reply that is a provider error instead: `{error: "rate limited", retryable: true}`."""

    error: str
    retryable: bool = False
    retry_after: float | None = Field(None, ge=0)


class ScriptedToolUse(OptionsModel):
    """A tool call to report before the reply: `{name: Read, argument: notes.md}`."""

    name: str = Field(min_length=1)
    argument: Any = None


Reply = Annotated[
    str | int | float | ScriptedError,
    Field(description="a string, a number or {error, retryable, retry_after}"),
]
ToolUseEntry = Annotated[
    str | ScriptedToolUse, Field(description="a tool name or {name, argument}")
]


class ScriptedOptions(OptionsModel):
    """The `options:` map of a `provider: scripted` step."""

    replies: list[Reply] | None = None  # None: echo the prompt
    delay_ms: float = Field(0, ge=0)  # between chunks
    fail_after_chars: int | None = Field(None, ge=0)  # cut the stream there, then fail
    context_window: int = Field(0, ge=0)  # 0: no limit
    tool_uses: list[ToolUseEntry] = Field(default_factory=list)


class ScriptedProvider:
    """Serves `options.replies` in order (or echoes the prompt), streamed in small chunks."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        # (step, speaker) -> index of the next reply
        self._next_reply: dict[tuple[str, str], int] = {}

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        script = parse_options(self.name, ScriptedOptions, turn.options)
        messages, dropped = _fit(build_messages(turn), script.context_window)
        reply = turn.prompt if script.replies is None else self._take_reply(turn, script.replies)
        for tool_use in script.tool_uses:
            if isinstance(tool_use, str):
                yield ToolUse(tool_use)
            else:
                yield ToolUse(tool_use.name, _argument_text(tool_use.argument))
        text = reply if script.fail_after_chars is None else reply[: script.fail_after_chars]
        for index, chunk in enumerate(split_chunks(text)):
            if index and script.delay_ms:
                await asyncio.sleep(script.delay_ms / 1000)
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
        key = (turn.step, turn.speaker)
        index = self._next_reply.get(key, max(turn.turn_number - 1, 0))
        self._next_reply[key] = index + 1
        if index >= len(replies):
            raise ProviderError(self.name, "no more replies")
        entry = replies[index]
        if isinstance(entry, ScriptedError):
            raise ProviderError(
                self.name, entry.error, retryable=entry.retryable, retry_after=entry.retry_after
            )
        return str(entry)

    def _mid_stream_error(self, streamed: int) -> ProviderError:
        # Retryable on purpose: it lets tests check that the engine refuses to retry a turn
        # once text has been streamed, whatever the provider says.
        return ProviderError(
            self.name,
            f"stream failed after {streamed} characters (fail_after_chars)",
            retryable=True,
        )


def split_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """Word-ish pieces of at most `size` characters that join back into `text`."""
    for piece in _WORDISH.findall(text):
        for start in range(0, len(piece), size):
            yield piece[start : start + size]


def _fit(messages: list[Message], window: int) -> tuple[list[Message], int]:
    return fit_to_window(messages, window, estimate_message_tokens) if window else (messages, 0)


def _argument_text(value: Any) -> str:
    return "" if value is None else str(value)
