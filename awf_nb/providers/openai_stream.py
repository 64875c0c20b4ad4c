"""Reading a Chat Completions answer: the bytes of the response in, provider events out.

`StreamReader` does no I/O: the provider feeds it each network read (`feed`) and streams
the events it returns — the text of one read as one `TextDelta` — until `[DONE]`
(`done`); then `finish` gives the complete tool calls. A server that ignores `stream:
true` and answers with one JSON completion is read with `whole_completion`.

Everything a server sends is bounded here before it is kept: each event line (the SSE
decoder's limit), the reply's content — text, reasoning, tool-call names and arguments
— against the turn's `max_reply_bytes`, the number of tool calls against its
`max_tool_calls`, the whole stream's bytes (a server streaming events with nothing in them
forever), JSON nesting, and token counts. Text goes to the engine as it arrives and the
engine bounds it (keeping the text up to the limit); what is gathered here before the
engine sees it (tool-call pieces, reasoning) is refused here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from awf_nb.engine.ports import Message, ProviderEvent, TextDelta, ToolCall, Usage
from awf_nb.engine.reply_limits import (
    MAX_JSON_DEPTH,
    json_too_deep,
    reply_bytes_message,
    text_bytes,
    token_count,
    tool_calls_message,
)
from awf_nb.errors import ProviderError
from awf_nb.providers.history import estimate_message_tokens, estimate_tokens
from awf_nb.providers.openai_errors import error_message, mask, preview
from awf_nb.providers.sse import LineTooLong, SSEDecoder

# A stream's bytes are bounded at this many times the reply's bound (at least
# `MIN_STREAM_BYTES`): a token's event carries ~150 bytes of JSON around a few of text.
STREAM_BYTES_PER_REPLY_BYTE = 256
MIN_STREAM_BYTES = 64 << 20
# A JSON completion (a server ignoring `stream: true`) may be this much larger than the
# reply it carries.
JSON_ENVELOPE_BYTES = 1 << 20


@dataclass
class _CallPieces:
    """One streamed tool call while its pieces arrive."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamReader:
    """Turns one Chat Completions response into provider events, collecting the answer."""

    def __init__(
        self,
        provider: str,
        url: str,
        secrets: list[str],
        *,
        max_reply_bytes: int,
        max_tool_calls: int,
    ) -> None:
        self.provider = provider
        self.url = url
        self.secrets = secrets
        self.max_reply_bytes = max_reply_bytes
        self.max_tool_calls = max_tool_calls
        self.max_stream_bytes = max(STREAM_BYTES_PER_REPLY_BYTE * max_reply_bytes, MIN_STREAM_BYTES)
        self.parts: list[str] = []
        self.done = False  # `[DONE]` arrived
        self.failure: ProviderError | None = None  # raise after the events `feed` returned
        self.reported_usage: Usage | None = None
        self._decoder = SSEDecoder()
        self._stream_bytes = 0
        self._size = 0  # bytes of content: text, reasoning, tool-call names and arguments
        self._tool_calls: dict[int, _CallPieces] = {}  # by the pieces' `index`
        self._call_tokens = 0  # estimated tokens of the tool calls (for Usage without usage)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    # --- a stream -------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[ProviderEvent]:
        """The events of one network read (its text as one delta). After a bound is
        passed by what is gathered here, `failure` is set: the caller streams the events
        returned (the text so far is kept), then raises it."""
        self._stream_bytes += len(chunk)
        if self._stream_bytes > self.max_stream_bytes:
            raise self.error(
                f"the stream is longer than {self.max_stream_bytes} bytes "
                f"({STREAM_BYTES_PER_REPLY_BYTE} × options.max_reply_bytes); "
                "the text received so far is kept"
            )
        try:
            datas = self._decoder.feed(chunk)
        except LineTooLong as exc:
            raise self.error(f"malformed stream: {exc}; the reply so far is kept") from None
        texts: list[str] = []
        for data in datas:
            if data == "[DONE]" or data.strip() == "[DONE]":
                self.done = True
                break
            if data.strip():
                try:
                    self._chunk(self._decode(data), texts)
                except _Overflow as overflow:
                    self.failure = self.error(str(overflow))
                    break
        return [TextDelta("".join(texts))] if texts else []

    def end(self) -> list[ProviderEvent]:
        """The body ended: the last event when no blank line followed it; an error unless
        `[DONE]` came (the caller adds why the body ended)."""
        texts: list[str] = []
        for data in self._decoder.end():
            if data.strip() == "[DONE]":
                self.done = True
            elif data.strip() and not self.done:
                try:
                    self._chunk(self._decode(data), texts)
                except _Overflow as overflow:
                    self.failure = self.error(str(overflow))
        return [TextDelta("".join(texts))] if texts else []

    def finish(self) -> list[ProviderEvent]:
        """The complete calls, in index order; a call without an id gets `call_<n>` (its
        place in the reply), one without arguments `{}`. Pieces that never said which
        function they call are dropped (nothing the engine could run or answer)."""
        calls, self._tool_calls = self._tool_calls, {}
        finished: list[ProviderEvent] = []
        for index in sorted(calls):
            call = calls[index]
            arguments = "".join(call.arguments)
            if not call.name and not arguments.strip():
                continue
            number = len(finished) + 1
            call_id = call.id or f"call_{number}"
            finished.append(ToolCall(call_id, call.name, arguments if arguments.strip() else "{}"))
            self._call_tokens += estimate_tokens(call.name) + estimate_tokens(arguments)
        return finished

    # --- a JSON completion ----------------------------------------------------------------

    @property
    def max_json_bytes(self) -> int:
        return self.max_reply_bytes + JSON_ENVELOPE_BYTES

    def whole_completion(self, body: bytes) -> list[ProviderEvent]:
        """The events of one JSON completion (at most `max_json_bytes`, read by the caller)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("malformed response: the body is not JSON") from None
        if json_too_deep(text):
            raise self.error(f"malformed response: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            data = json.loads(text)
        except ValueError:
            raise self.error("malformed response: the body is not JSON") from None
        if not isinstance(data, dict):
            raise self.error("malformed response: the body is not a JSON object")
        if data.get("error"):
            raise self.error(f"server error: {error_message(data)}")
        texts: list[str] = []
        try:
            self._chunk(data, texts)
        except _Overflow as overflow:
            raise self.error(str(overflow)) from None
        self.done = True
        events: list[ProviderEvent] = [TextDelta("".join(texts))] if texts else []
        return events + self.finish()

    # --- after the answer -----------------------------------------------------------------

    def usage(self, messages: list[Message]) -> Usage:
        """The server's usage, else the len/4 estimate (llama_cpp.server sends none)."""
        if self.reported_usage is not None:
            return self.reported_usage
        return Usage(
            input_tokens=estimate_message_tokens(messages),
            output_tokens=estimate_tokens(self.text) + self._call_tokens,
            estimated=True,
        )

    def error(self, message: str, **kwargs: Any) -> ProviderError:
        return ProviderError(self.provider, f"{self.url}: {mask(message, self.secrets)}", **kwargs)

    # --- one event ------------------------------------------------------------------------

    def _decode(self, data: str) -> dict[str, Any]:
        if json_too_deep(data):
            raise self.error(
                f"malformed stream: an event nested deeper than {MAX_JSON_DEPTH} levels"
            )
        try:
            chunk = json.loads(data)
        except ValueError:
            raise self.error(f"malformed stream: event is not JSON: {preview(data)}") from None
        if not isinstance(chunk, dict):
            raise self.error(f"malformed stream: event is not a JSON object: {preview(data)}")
        if chunk.get("error"):
            raise self.error(f"server error in stream: {error_message(chunk)}")
        return chunk

    def _chunk(self, chunk: dict[str, Any], texts: list[str]) -> None:
        """Take one event: its text goes to `texts` (and `parts`), the rest is kept."""
        if (usage := chunk.get("usage")) is not None and isinstance(usage, dict):
            self.reported_usage = self._usage(usage)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self.error(f"malformed stream: choices is not a list: {preview(chunk)}")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # only the first choice is the answer (n > 1 is not requested)
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise self.error(f"malformed stream: delta is not an object: {preview(chunk)}")
            content = delta.get("content")
            if isinstance(content, str) and content:
                # Counted, not refused: the engine keeps the text up to the bound.
                self._size += text_bytes(content)
                self.parts.append(content)
                texts.append(content)
            # Checked only when there: most events are one token of text (the hot path).
            if delta.get("tool_calls"):
                self._add_tool_call_pieces(delta["tool_calls"])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(reasoning := delta.get(key), str):  # not kept, but counted
                    self._grow(text_bytes(reasoning))

    def _grow(self, size: int) -> None:
        self._size += size
        if self._size > self.max_reply_bytes:
            raise _Overflow(reply_bytes_message(self.max_reply_bytes))

    def _usage(self, usage: dict[str, Any]) -> Usage:
        counts = []
        for key in ("prompt_tokens", "completion_tokens"):
            count = token_count(usage.get(key))
            if count is None:
                raise self.error(
                    f"malformed stream: usage.{key} is not a token count "
                    f"(a whole number from 0; got {preview(usage.get(key))})"
                )
            counts.append(count)
        return Usage(input_tokens=counts[0], output_tokens=counts[1])

    def _add_tool_call_pieces(self, pieces: Any) -> None:
        """Collect the pieces of streamed tool calls: one per call per chunk, matched by
        `index` (its position in the list when a server sends none). The id and name come
        with a call's first piece; the arguments arrive in pieces to be joined."""
        if not isinstance(pieces, list):
            return
        for position, piece in enumerate(pieces):
            if not isinstance(piece, dict):
                continue
            index = piece.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                index = position
            call = self._tool_calls.get(index)
            if call is None:
                if len(self._tool_calls) >= self.max_tool_calls:
                    raise _Overflow(tool_calls_message(self.max_tool_calls))
                call = self._tool_calls[index] = _CallPieces()
            # llama_cpp.server repeats the id and name in every piece: the first one wins.
            if not call.id:
                call.id = _text(piece.get("id"))
                self._grow(len(call.id))
            function = piece.get("function")
            if isinstance(function, dict):
                if not call.name:
                    call.name = _text(function.get("name"))
                    self._grow(text_bytes(call.name))
                arguments = _text(function.get("arguments"))
                self._grow(text_bytes(arguments))
                call.arguments.append(arguments)


class _Overflow(Exception):
    """A bound was passed by what the reader gathers (the message names it)."""


def _text(value: Any) -> str:
    """A string field of a stream event; servers sometimes send null or an object."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (ValueError, RecursionError):  # NaN is fine; only what cannot be written fails
        return ""
