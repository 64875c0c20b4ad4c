"""The `openai_compatible` provider: streamed Chat Completions over HTTP.

Talks to any server speaking the OpenAI protocol (OpenAI, vLLM, Ollama's `/v1`, LM
Studio, `python -m llama_cpp.server`). Every turn POSTs `[system] + history + user` to
`{base_url}/chat/completions` with `stream: true` and reads the Server-Sent Events as
they arrive, so the frontend shows the answer while it is written.

The exchange runs on the run's event loop with the loop's shared `httpx2.AsyncClient`
(http_client.py): hundreds of conversations in flight cost no thread each, and share
their connections. openai_request.py builds what is sent; openai_stream.py turns the bytes
read into events, within the reply's bounds; batched_reads.py hands them over as they come,
one batch per network read. Cancelling the turn (Ctrl-C, a timeout, closing the stream)
closes the connection at once, before or after the answer started, so the server sees the
client go away and stops generating.

Tools (chat mode): when the turn has tools they are sent as OpenAI `tools` (function
format), with `tool_choice` when `options.tool_choice` is set; the history's tool calls and
results go as assistant `tool_calls` and `tool` messages. The streamed `tool_calls` pieces
are assembled per `index` and yielded as complete `ToolCall`s once the stream has ended.

Failures raise `ProviderError` with one line naming the provider, the URL and what went
wrong (openai_errors.py); `retryable`/`retry_after` tell the engine whether trying again
may help (the engine retries, this module never does). The API key is a secret: it only
ever goes into the Authorization header and is masked in anything a server sends back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from pydantic import Field

from awf_nb.engine.ports import Final, Message, ProviderEvent, TurnRequest
from awf_nb.engine.summary import format_duration
from awf_nb.errors import ProviderError
from awf_nb.providers.batched_reads import BatchedReads
from awf_nb.providers.history import (
    build_messages,
    estimate_message_tokens,
    fit_to_window,
    truncation_notice,
)
from awf_nb.providers.http_client import ClientLease
from awf_nb.providers.openai_errors import (
    CONNECT_TIMEOUT,
    describe,
    http_error,
    transport_error,
)
from awf_nb.providers.openai_request import (
    display_url,
    endpoint_url,
    request_body,
    url_secrets,
)
from awf_nb.providers.openai_stream import StreamReader
from awf_nb.providers.options import OptionsModel, parse_options
from awf_nb.secrets import is_secret_header

# What a request gets from a connection that was closed before any answer came back.
_CLOSED_BEFORE_ANSWERING = (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError)

DEFAULT_READ_TIMEOUT = 300.0
# After `[DONE]` what follows is drained this long at most, so the connection goes back to
# the pool; a server keeping the stream open only costs its connection (closed then).
DRAIN_SECONDS = 0.5
# An error response's body is read this far (its message is shown cut to one short line).
MAX_ERROR_BODY = 64 << 10
_ENV_NAMES = ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY")


@dataclass(frozen=True)
class _Settings:
    """What one turn sends, resolved from the step's options and the environment."""

    base_url: str
    url: httpx2.URL  # the endpoint
    model: str
    api_key: str = field(repr=False)
    headers: dict[str, str] = field(repr=False)  # the request's, credentials included
    parameters: dict[str, Any]  # temperature, top_p, seed, stop
    max_tokens: int | None
    max_tokens_field: str | None  # forced by options.max_tokens_field, else negotiated
    context_window: int
    tool_choice: str | None = None  # "auto", "none", "required" or a tool's name
    secrets: list[str] = field(default_factory=list, repr=False)  # masked in what comes back
    shown_url: str = ""  # the endpoint as messages show it


class OpenAICompatibleProvider:
    """Streams chat completions with the event loop's shared HTTP client (a lease, given
    back by `aclose`)."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "openai_compatible") -> None:
        self.name = name
        self._clients = ClientLease()
        # Base URLs whose server rejected `max_completion_tokens`: they get `max_tokens`.
        self._legacy_max_tokens: set[str] = set()
        self._responses: set[httpx2.Response] = set()  # the turns streaming now
        # The last turn's options (a copy), environment values and settings.
        self._last_settings: tuple[Any, tuple[str | None, ...], _Settings] | None = None

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        settings = self._settings(turn)
        messages, dropped = self._fit(build_messages(turn), settings)
        read_timeout = _read_timeout(turn.timeout)
        reader = StreamReader(
            self.name,
            settings.shown_url,
            settings.secrets,
            max_reply_bytes=turn.max_reply_bytes,
            max_tool_calls=turn.max_tool_calls,
        )
        head = self._head(settings)
        body = request_body(head, messages, turn.tools, settings.tool_choice)
        response = await self._send(settings, body, read_timeout)
        self._responses.add(response)
        try:
            async for events in BatchedReads(_answer(response, reader, read_timeout)).batches():
                for event in events:
                    yield event
        finally:
            self._responses.discard(response)
            # An unfinished response closes its connection (the server stops generating);
            # one read to its end goes back to the pool for the next turn.
            await response.aclose()
        for event in reader.finish():
            yield event
        yield reader.usage(messages)
        if dropped:
            yield truncation_notice(dropped, settings.context_window)
        yield Final(reader.text, cut=reader.cut)

    async def aclose(self) -> None:
        """Close the responses still streaming, then give back the loop's HTTP clients
        (the last provider on the loop closes them, with their pooled connections)."""
        responses, self._responses = list(self._responses), set()
        for response in responses:
            with contextlib.suppress(Exception):
                await response.aclose()
        await self._clients.aclose()

    # --- the request ---------------------------------------------------------------------------

    async def _send(
        self, settings: _Settings, body: dict[str, Any], read_timeout: float
    ) -> httpx2.Response:
        """POST the turn; returns the open streaming response or raises `ProviderError`.
        A server refusing `max_completion_tokens` is asked again with `max_tokens`."""
        timeout = httpx2.Timeout(read_timeout, connect=CONNECT_TIMEOUT, pool=read_timeout)
        client = self._clients.client(settings.base_url)
        resent = False
        for _attempt in range(3):  # at most one resend for each of the two reasons below
            try:
                request = client.build_request(
                    "POST", settings.url, json=body, headers=settings.headers, timeout=timeout
                )
            except (ValueError, TypeError) as exc:  # a header no HTTP request can carry
                raise ProviderError(
                    self.name, f"cannot send the request ({describe(exc)})"
                ) from None
            try:
                response = await client.send(request, stream=True)
            except httpx2.TransportError as exc:
                if not resent and isinstance(exc, _CLOSED_BEFORE_ANSWERING):
                    # A pooled connection the server closed just as it was reused (its
                    # keep-alive ran out): no byte of an answer came back. Sent once more,
                    # on a new connection, as HTTP clients do; twice is the server's fault.
                    resent = True
                    continue
                raise transport_error(self.name, settings.shown_url, exc, read_timeout) from None
            if response.is_success:
                return response
            try:
                text = await _error_body(response)
            finally:
                await response.aclose()
            if not self._switch_max_tokens_field(settings, body, response.status_code, text):
                raise http_error(self.name, settings.shown_url, settings.secrets, response, text)
        raise http_error(self.name, settings.shown_url, settings.secrets, response, text)

    def _switch_max_tokens_field(
        self, settings: _Settings, body: dict[str, Any], status: int, text: str
    ) -> bool:
        """Resend as `max_tokens` once when the server rejects `max_completion_tokens`."""
        rejected = (
            status == 400
            and "max_completion_tokens" in body
            and settings.max_tokens_field is None
            and "max_completion_tokens" in text
        )
        if rejected:
            body["max_tokens"] = body.pop("max_completion_tokens")
            self._legacy_max_tokens.add(settings.base_url)
        return rejected

    def _head(self, settings: _Settings) -> dict[str, Any]:
        """The body's keys but the messages and tools."""
        head: dict[str, Any] = {
            "model": settings.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            **settings.parameters,
        }
        if settings.max_tokens is not None:
            head[self._max_tokens_field(settings)] = settings.max_tokens
        return head

    def _max_tokens_field(self, settings: _Settings) -> str:
        if settings.max_tokens_field:
            return settings.max_tokens_field
        if settings.base_url in self._legacy_max_tokens:
            return "max_tokens"
        return "max_completion_tokens"

    def _fit(self, messages: list[Message], settings: _Settings) -> tuple[list[Message], int]:
        window = settings.context_window
        if not window:
            return messages, 0
        # Leave room for the answer, but never more than half the window.
        reserve = min(settings.max_tokens or 0, window // 2)
        return fit_to_window(messages, window - reserve, estimate_message_tokens)

    # --- options -------------------------------------------------------------------------------

    def _settings(self, turn: TurnRequest) -> _Settings:
        """The turn's settings; the last turn's again when its options and environment
        variables are equal to this one's (a step's turns send the same options, and
        validating them is most of the cost of a request's set-up)."""
        env_values = tuple(turn.env.get(name, os.environ.get(name)) for name in _ENV_NAMES)
        last = self._last_settings
        if last is not None and last[1] == env_values and last[0] == turn.options:
            return last[2]
        env = {
            name: value
            for name, value in zip(_ENV_NAMES, env_values, strict=True)
            if value is not None
        }
        settings = self._resolve(turn.options, env)
        try:  # a copy, so that options changed in place are seen as changed
            self._last_settings = (copy.deepcopy(turn.options), env_values, settings)
        except Exception:  # options that cannot be copied are read afresh every turn
            self._last_settings = None
        return settings

    def _resolve(self, raw: Mapping[str, Any], env: Mapping[str, str]) -> _Settings:
        options = parse_options(self.name, OpenAIOptions, raw)
        base_url = self._required(options.base_url, "base_url", env, "OPENAI_BASE_URL")
        if not base_url.lower().startswith(("http://", "https://")):
            shown = _shown(base_url)
            raise ProviderError(
                self.name, f"base_url must start with http:// or https:// (got {shown!r})"
            )
        try:
            url = endpoint_url(base_url)
        except httpx2.InvalidURL as exc:
            raise ProviderError(self.name, f"base_url is not a valid URL ({exc})") from None
        api_key = (options.api_key or env.get("OPENAI_API_KEY") or "").strip()
        extra = {name: str(value) for name, value in options.headers.items()}
        headers = {
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
            **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
            **extra,
        }
        credentials = [v for k, v in extra.items() if is_secret_header(k)]
        secrets = [s for s in [api_key, *credentials, *url_secrets(url)] if len(s) >= 4]
        sampling = {
            "temperature": options.temperature,
            "top_p": options.top_p,
            "seed": options.seed,
            "stop": options.stop,
        }
        return _Settings(
            base_url=base_url,
            url=url,
            model=self._required(options.model, "model", env, "OPENAI_MODEL"),
            api_key=api_key,
            headers=headers,
            parameters={key: value for key, value in sampling.items() if value is not None},
            max_tokens=options.max_completion_tokens or options.max_tokens,
            max_tokens_field=options.max_tokens_field,
            context_window=options.context_window or 0,
            tool_choice=options.tool_choice,
            secrets=secrets,
            shown_url=display_url(url),
        )

    def _required(self, value: str | None, key: str, env: Mapping[str, str], env_name: str) -> str:
        """The option, else its environment variable (blank counts as unset), else an error."""
        text = (value or "").strip() or (env.get(env_name) or "").strip()
        if not text:
            raise ProviderError(
                self.name,
                f"{key} is required",
                hint=f"set options.{key} on the step or the {env_name} environment variable",
            )
        return text


class OpenAIOptions(OptionsModel):
    """The `options:` map of a `provider: openai_compatible` step."""

    base_url: str | None = None  # else $OPENAI_BASE_URL
    model: str | None = None  # else $OPENAI_MODEL
    api_key: str | None = None  # else $OPENAI_API_KEY
    headers: dict[str, str | int | float] = Field(
        default_factory=dict, description="a mapping of header names to string values"
    )
    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    top_p: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    seed: int | None = None
    stop: str | list[str] | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)  # wins over max_tokens
    # Which field carries the limit; by default the newer one, the older after a 400.
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None
    context_window: int | None = Field(None, ge=1)
    # Sent only on turns with tools: "auto", "none", "required", or the name of the tool the
    # model must call (forcing a call every round never lets the model answer: for tests).
    tool_choice: str | None = Field(
        None, min_length=1, description='"auto", "none", "required" or a tool name'
    )


# --- reading the stream --------------------------------------------------------------------------


async def _answer(
    response: httpx2.Response, reader: StreamReader, read_timeout: float
) -> AsyncGenerator[list[ProviderEvent]]:
    """The events of the answer, one list per network read, until `[DONE]` (then the
    rest of the body is drained, briefly). Raises `ProviderError`."""
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind == "application/json":  # a server that ignores `stream: true`
        yield reader.whole_completion(await _read_json(response, reader))
        return
    if kind != "text/event-stream":
        raise reader.error(
            f"malformed stream: expected Content-Type text/event-stream, got {kind or 'none'!r}"
        )
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            if events := reader.feed(chunk):
                yield events
            if reader.failure is not None:
                raise reader.failure
            if reader.done:
                break
        else:
            if events := reader.end():
                yield events
            if reader.failure is not None:
                raise reader.failure
            if not reader.done:
                raise reader.error("stream ended before [DONE]", retryable=True)
    except httpx2.ReadTimeout:
        raise reader.error(
            f"no data from the server for {format_duration(read_timeout)} (read timeout)"
        ) from None
    except httpx2.TransportError as exc:  # the server dropped the connection mid-answer
        raise reader.error(
            f"stream ended before [DONE] ({describe(exc)})", retryable=True
        ) from None
    await _drain(chunks)


async def _read_json(response: httpx2.Response, reader: StreamReader) -> bytes:
    """The body of a JSON completion, bounded."""
    body = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > reader.max_json_bytes:
                raise reader.error(
                    f"the reply is longer than {reader.max_json_bytes} bytes "
                    "(options.max_reply_bytes and 1 MiB of JSON around it)"
                )
    except httpx2.TransportError as exc:
        raise reader.error(f"response cut short ({describe(exc)})", retryable=True) from None
    return bytes(body)


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows `[DONE]` (normally just the end of the body), briefly: a response
    read to its end gives its connection back to the pool."""
    with contextlib.suppress(TimeoutError, httpx2.TransportError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in chunks:
                pass


async def _error_body(response: httpx2.Response) -> str:
    """The start of an error response's body ("" when the connection dropped first)."""
    body = bytearray()
    with contextlib.suppress(httpx2.TransportError):
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= MAX_ERROR_BODY:
                break
    return body[:MAX_ERROR_BODY].decode("utf-8", "replace")


def _read_timeout(turn_timeout: float | None) -> float:
    """Seconds to wait for the next bytes: the step's turn timeout, else 300 s."""
    return turn_timeout if turn_timeout and turn_timeout > 0 else DEFAULT_READ_TIMEOUT


def _shown(url: str) -> str:
    """`url` as messages show it (a URL httpx cannot even parse, as it was written)."""
    try:
        return display_url(httpx2.URL(url))
    except httpx2.InvalidURL:
        return url
