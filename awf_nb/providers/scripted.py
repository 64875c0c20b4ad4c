"""The `scripted` provider: deterministic replies without a model (tests, demos, docs).

Options (all optional):

- `replies`: list served in order, one per turn of the step. An entry is a string (the
  reply), `{error: "...", retryable: false, retry_after: null}` (the turn fails with a
  ProviderError), or tool calls (chat mode):

      {tool_calls: [{name: get_weather, arguments: {city: Paris}}], text: "Let me check."}

  which streams `text` (optional), then one `ToolCall` per call — ids `call_1`, `call_2`, …
  unless an entry gives `id`; `arguments` is an object (sent as its JSON text) or a JSON
  text as is (so invalid JSON can be scripted too) — and ends with `Final(text)` ("" when
  there is no text). Each tool round of a turn takes the next entry, like a turn does.
  When the list is used up the turn fails with `scripted: no more replies`.
  Without `replies` the provider echoes: the reply is the prompt it received (in a tool
  round, which has no prompt, the tool results it received, one per line).
- `delay_ms`: pause between streamed chunks (replies stream in pieces of at most 8 chars).
- `tool_uses`: list of `{name, argument}` notices emitted before the text of every turn.
- `fail_after_chars`: stream that many characters of the reply, then fail (mid-stream).
- `context_window`: token budget (len/4 estimate); the oldest exchanges are dropped to fit,
  reported with a `Notice(truncated_turns=N)`.
- `max_tokens`: a reply longer than that (len/4 estimate: 4 characters a token) is cut
  there and reported as cut (`Final(cut=True)`), as a model's reply that hit its limit.
- `cost_usd`: what each turn reports it cost, in USD (as an agent CLI such as claude
  reports it); by default no cost is reported.

Every request is kept in `received` (the `TurnRequest`s in order: history, tools,
`continues`), so engine tests can check what a provider was sent.

The counter of served replies is kept per step and speaker (a conversation partner on the
scripted provider has its own list); the first turn a step asks for starts at
`turn.turn_number - 1`, so a conversation restored by `awf resume` continues where it was.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from awf_nb.engine.ports import (
    Final,
    Message,
    ProviderEvent,
    TextDelta,
    ToolCall,
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


class ScriptedCall(OptionsModel):
    """One tool call of a scripted reply: `{name: get_weather, arguments: {city: Paris}}`."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="an object or its JSON text"
    )
    id: str | None = Field(None, min_length=1)


class ScriptedCalls(OptionsModel):
    """A reply that calls tools: `{tool_calls: [...], text: "Let me check."}`."""

    tool_calls: list[ScriptedCall] = Field(
        min_length=1, description="a non-empty list of {name, arguments, id}"
    )
    text: str = ""


Reply = Annotated[
    str | int | float | ScriptedError | ScriptedCalls,
    Field(description="a string, a number, {error, retryable, retry_after} or {tool_calls, text}"),
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
    max_tokens: int | None = Field(None, ge=1)  # cut longer replies (4 characters a token)
    cost_usd: float | None = Field(None, ge=0)  # reported as each turn's cost


class ScriptedProvider:
    """Serves `options.replies` in order (or echoes the prompt), streamed in small chunks."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        # (step, speaker) -> index of the next reply
        self._next_reply: dict[tuple[str, str], int] = {}
        self.received: list[TurnRequest] = []  # every request, in order (for tests)

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        self.received.append(turn)
        script = parse_options(self.name, ScriptedOptions, turn.options)
        messages, dropped = _fit(build_messages(turn), script.context_window)
        calls: list[ToolCall] = []
        if script.replies is None:
            reply = _echo(turn)
        else:
            reply, calls = self._take_reply(turn, script.replies)
        limit, cut = script.max_tokens, False
        if limit is not None and len(reply) > limit * 4:
            reply, cut = reply[: limit * 4], True
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
        for call in calls:
            yield call
        yield Usage(
            input_tokens=estimate_message_tokens(messages),
            output_tokens=estimate_tokens(reply)
            + sum(estimate_tokens(c.name) + estimate_tokens(c.arguments) for c in calls),
            estimated=True,
            cost_usd=script.cost_usd,
        )
        if dropped:
            yield truncation_notice(dropped, script.context_window)
        yield Final(reply, cut=cut)

    async def aclose(self) -> None:
        """Nothing to release; the reply counters live as long as the run."""

    def _take_reply(self, turn: TurnRequest, replies: list[Any]) -> tuple[str, list[ToolCall]]:
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
        if isinstance(entry, ScriptedCalls):
            return entry.text, [_tool_call(n, c) for n, c in enumerate(entry.tool_calls, 1)]
        return str(entry), []

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


def _tool_call(number: int, call: ScriptedCall) -> ToolCall:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return ToolCall(call.id or f"call_{number}", call.name, arguments)


def _echo(turn: TurnRequest) -> str:
    """The prompt; in a tool round, the tool results the history ends with."""
    if not turn.continues:
        return turn.prompt
    results: list[str] = []
    for message in reversed(turn.history):
        if message.role != "tool":
            break
        results.append(message.content)
    return "\n".join(reversed(results))


def _argument_text(value: Any) -> str:
    return "" if value is None else str(value)
