"""The `openai_compatible` provider: streamed Chat Completions over HTTP.

Talks to any server speaking the OpenAI protocol (OpenAI, vLLM, Ollama's `/v1`, LM
Studio, `python -m llama_cpp.server`). Every turn POSTs `[system] + history + user` to
`{base_url}/chat/completions` with `stream: true` and reads the Server-Sent Events as
they arrive, so the frontend shows the answer while it is written.

Tools (chat mode): when the turn has tools they are sent as OpenAI `tools` (function
format), with `tool_choice` when `options.tool_choice` is set; the history's tool calls and
results go as assistant `tool_calls` and `tool` messages. The streamed `tool_calls` pieces
are assembled per `index` and yielded as complete `ToolCall`s once the stream has ended.
A turn without tools sends exactly what it sent before tools existed.

Failures raise `ProviderError` with one line naming the provider, the URL and what went
wrong; `retryable`/`retry_after` tell the engine whether trying again may help (the
engine retries, this module never does). The API key is a secret: it only ever goes into
the Authorization header and is masked in anything a server sends back.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import Field

from awf_nb.engine.ports import (
    Final,
    Message,
    ProviderEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
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
from awf_nb.providers.sse import LineTooLong, SSEDecoder
from awf_nb.secrets import Masker, is_secret_header

CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 300.0
_MAX_SERVER_MESSAGE = 300
_DRAIN_SECONDS = 0.5
_ENDPOINT = "/chat/completions"


@dataclass(frozen=True)
class _Settings:
    """What one turn sends, resolved from the step's options and the environment."""

    base_url: str
    model: str
    api_key: str = field(repr=False)
    headers: dict[str, str] = field(repr=False)
    parameters: dict[str, Any]  # temperature, top_p, seed, stop
    max_tokens: int | None
    max_tokens_field: str | None  # forced by options.max_tokens_field, else negotiated
    context_window: int
    tool_choice: str | None = None  # "auto", "none", "required" or a tool's name

    @property
    def url(self) -> str:
        return f"{self.base_url}{_ENDPOINT}"

    @property
    def secrets(self) -> list[str]:
        """Values to mask in anything a server sends back: the key, credential headers."""
        credentials = [v for k, v in self.headers.items() if is_secret_header(k)]
        return [s for s in [self.api_key, *credentials] if len(s) >= 4]


class OpenAICompatibleProvider:
    """Streams chat completions; one `httpx.AsyncClient` per run, created on first use."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "openai_compatible") -> None:
        self.name = name
        # One client per URL scheme: TLS is set up (the CA bundle read) only for https.
        self._clients: dict[bool, httpx.AsyncClient] = {}
        # Base URLs whose server rejected `max_completion_tokens`: they get `max_tokens`.
        self._legacy_max_tokens: set[str] = set()
        self._wire = _WireCache()

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        settings = self._resolve(turn)
        messages, dropped = self._fit(build_messages(turn), settings)
        body = self._body(settings, turn.tools)
        response = await self._send(settings, body, self._wire.encode(messages), turn.timeout)
        reader = _StreamReader(
            self.name, _display_url(settings.url), settings.secrets, _read_timeout(turn.timeout)
        )
        try:
            async for event in reader.events(response):
                yield event
        finally:
            # Closing an unfinished response drops its connection: the server sees the
            # client go away and stops generating (cancellation, aclose, errors).
            await response.aclose()
        yield reader.usage(messages)
        if dropped:
            yield truncation_notice(dropped, settings.context_window)
        yield Final(reader.text)

    async def aclose(self) -> None:
        """Close the run's HTTP client (and its pooled connections)."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()

    # --- the request -------------------------------------------------------------------------

    def _http(self, url: str) -> httpx.AsyncClient:
        """The client for `url`. Plain http never speaks TLS (redirects are not followed),
        so its client skips the TLS context; https always verifies."""
        secure = not url.lower().startswith("http://")
        client = self._clients.get(secure)
        if client is None:
            client = self._clients[secure] = httpx.AsyncClient(
                timeout=httpx.Timeout(DEFAULT_READ_TIMEOUT, connect=CONNECT_TIMEOUT),
                verify=_tls_context() if secure else False,
            )
        return client

    async def _send(
        self,
        settings: _Settings,
        body: dict[str, Any],
        messages: bytes,
        turn_timeout: float | None,
    ) -> httpx.Response:
        """POST the turn (`body` with `messages`, the JSON array of the messages); returns
        the open streaming response or raises `ProviderError`."""
        read_timeout = _read_timeout(turn_timeout)
        timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT)
        headers = self._headers(settings)
        for _attempt in range(2):
            try:
                request = self._http(settings.url).build_request(
                    "POST",
                    settings.url,
                    content=_encode_body(body, messages),
                    headers=headers,
                    timeout=timeout,
                )
            except httpx.InvalidURL as exc:
                raise self._error(f"base_url is not a valid URL ({exc})") from None
            try:
                response = await self._http(settings.url).send(request, stream=True)
            except httpx.TransportError as exc:
                raise _transport_error(self.name, settings.url, exc, read_timeout) from None
            if response.is_success:
                return response
            with contextlib.suppress(httpx.TransportError):  # the status says enough
                await response.aread()
            await response.aclose()
            if not self._switch_max_tokens_field(settings, body, response):
                raise _http_error(self.name, settings, response)
        raise _http_error(self.name, settings, response)

    def _switch_max_tokens_field(
        self, settings: _Settings, body: dict[str, Any], response: httpx.Response
    ) -> bool:
        """Resend as `max_tokens` once when the server rejects `max_completion_tokens`."""
        rejected = (
            response.status_code == 400
            and "max_completion_tokens" in body
            and settings.max_tokens_field is None
            and "max_completion_tokens" in _body_text(response)
        )
        if rejected:
            body["max_tokens"] = body.pop("max_completion_tokens")
            self._legacy_max_tokens.add(settings.base_url)
        return rejected

    def _headers(self, settings: _Settings) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
            "Content-Type": "application/json",
        }
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        headers.update(settings.headers)
        return headers

    def _body(self, settings: _Settings, tools: list[ToolSpec]) -> dict[str, Any]:
        """The request body without its messages (`_encode_body` puts them in second)."""
        body: dict[str, Any] = {
            "model": settings.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            **settings.parameters,
        }
        if settings.max_tokens is not None:
            body[self._max_tokens_field(settings)] = settings.max_tokens
        # Only with tools: a request without them must stay what servers that know nothing
        # of tools (or reject an empty `tools` list) have always been sent.
        if tools:
            body["tools"] = [wire_tool(tool) for tool in tools]
            if settings.tool_choice is not None:
                body["tool_choice"] = wire_tool_choice(settings.tool_choice)
        return body

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

    # --- options -----------------------------------------------------------------------------

    def _resolve(self, turn: TurnRequest) -> _Settings:
        options = parse_options(self.name, OpenAIOptions, turn.options)
        env = {**os.environ, **turn.env}
        base_url = self._required(options.base_url, "base_url", env, "OPENAI_BASE_URL")
        # A full endpoint URL is a common slip: accept it rather than POST to …/chat/completions
        # twice and fail with a 404.
        base_url = base_url.rstrip("/").removesuffix(_ENDPOINT)
        if not base_url.startswith(("http://", "https://")):
            raise self._error(
                f"base_url must start with http:// or https:// (got {_display_url(base_url)!r})"
            )
        sampling = {
            "temperature": options.temperature,
            "top_p": options.top_p,
            "seed": options.seed,
            "stop": options.stop,
        }
        return _Settings(
            base_url=base_url,
            model=self._required(options.model, "model", env, "OPENAI_MODEL"),
            api_key=(options.api_key or env.get("OPENAI_API_KEY") or "").strip(),
            headers={name: str(value) for name, value in options.headers.items()},
            parameters={key: value for key, value in sampling.items() if value is not None},
            max_tokens=options.max_completion_tokens or options.max_tokens,
            max_tokens_field=options.max_tokens_field,
            context_window=options.context_window or 0,
            tool_choice=options.tool_choice,
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

    def _error(self, message: str, **kwargs: Any) -> ProviderError:
        return ProviderError(self.name, message, **kwargs)


class OpenAIOptions(OptionsModel):
    """The `options:` map of a `provider: openai_compatible` step."""

    base_url: str | None = None  # else $OPENAI_BASE_URL
    model: str | None = None  # else $OPENAI_MODEL
    api_key: str | None = None  # else $OPENAI_API_KEY
    headers: dict[str, str | int | float] = Field(
        default_factory=dict, description="a mapping of header names to string values"
    )
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
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


# --- the wire format of messages and tools -----------------------------------------------------


def wire_message(message: Message) -> dict[str, Any]:
    """One history message in Chat Completions form."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.tool_calls:
        return {
            "role": message.role,
            # "" (not null, not left out) when the reply was only calls: OpenAI, vLLM and
            # Ollama take all three, but llama_cpp.server refuses null (HTTP 500) and its
            # chat templates fail on a missing content (an empty stream).
            "content": message.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _json(value: Any) -> bytes:
    """`value` as JSON bytes, exactly as httpx's `json=` encodes a request body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _encode_body(body: dict[str, Any], messages: bytes) -> bytes:
    """`body` as JSON with the encoded `messages` array as its second key (after `model`,
    where a body built as one dict has it)."""
    first, *rest = body.items()
    head = _json(dict([first]))[:-1]
    tail = _json(dict(rest))[1:] if rest else b"}"
    return b"".join((head, b',"messages":', messages, b"," if rest else b"", tail))


class _WireCache:
    """The JSON of history messages, made once per message object.

    Every request sends the whole history, and each tool round or turn adds only a few
    messages to it: translating the history afresh costs O(n) per request, O(n²) per
    conversation. Messages are immutable, so the engine's history list holds the same
    objects request after request; their encoding is kept by identity (the entry holds
    the message, so its id cannot be reused while cached). Entries no request used lately
    are dropped when the cache outgrows the request at hand (bounded memory, and a
    shared provider serving several steps keeps both their histories).
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Message, bytes]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def encode(self, messages: list[Message]) -> bytes:
        """The JSON array of `messages` in Chat Completions form."""
        entries = self._entries
        parts: list[bytes] = []
        for message in messages:
            entry = entries.get(id(message))
            if entry is None or entry[0] is not message:
                entry = entries[id(message)] = (message, _json(wire_message(message)))
            parts.append(entry[1])
        if len(entries) > 2 * len(messages) + 64:
            self._entries = {id(m): entries[id(m)] for m in messages}
        return b"[" + b",".join(parts) + b"]"


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool in OpenAI's function format."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


@dataclass
class _CallPieces:
    """One streamed tool call while its pieces arrive."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamReader:
    """Turns a Chat Completions SSE stream into provider events, collecting the answer."""

    def __init__(self, provider: str, url: str, secrets: list[str], read_timeout: float) -> None:
        self.provider = provider
        self.url = url
        self.secrets = secrets
        self.read_timeout = read_timeout
        self.parts: list[str] = []
        self.reported_usage: Usage | None = None
        self._tool_calls: dict[int, _CallPieces] = {}  # by the pieces' `index`
        self._call_tokens = 0  # estimated tokens of the tool calls (for Usage without usage)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def usage(self, messages: list[Message]) -> Usage:
        """The server's usage, else the len/4 estimate (llama_cpp.server sends none)."""
        if self.reported_usage is not None:
            return self.reported_usage
        return Usage(
            input_tokens=estimate_message_tokens(messages),
            output_tokens=estimate_tokens(self.text) + self._call_tokens,
            estimated=True,
        )

    async def events(self, response: httpx.Response) -> AsyncIterator[ProviderEvent]:
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if content_type == "application/json":
            # Some servers ignore `stream: true` and answer with one JSON completion.
            for event in self._whole_completion(await self._read_json(response)):
                yield event
            return
        if content_type != "text/event-stream":
            raise self.error(
                "malformed stream: expected Content-Type text/event-stream, "
                f"got {content_type or 'none'!r}"
            )
        done = False
        decoder = SSEDecoder()
        stream = response.aiter_bytes()
        try:
            # The events of one network read become at most one TextDelta each between
            # other events: a fast server sends dozens of tokens per read, and every event
            # costs the engine and the frontends the same whatever its length.
            async for datas in _sse_reads(stream, decoder):
                events: list[ProviderEvent] = []
                for data in datas:
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    if data.strip():
                        events.extend(self._chunk_events(self._decode(data)))
                for event in _merge_text(events):
                    yield event
                if done:
                    break
            if done:
                await _drain(stream)
        except LineTooLong as exc:
            raise self.error(f"malformed stream: {exc}; the reply so far is kept") from None
        except httpx.ReadTimeout:
            raise self.error(
                f"no data from the server for {self.read_timeout:g}s (read timeout)"
            ) from None
        except httpx.TransportError as exc:
            # The server dropped the connection mid-answer.
            raise self.error(
                f"stream ended before [DONE] ({_describe(exc)})", retryable=True
            ) from None
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if not done:
            raise self.error("stream ended before [DONE]", retryable=True)
        for event in self._finish_tool_calls():
            yield event

    def error(self, message: str, **kwargs: Any) -> ProviderError:
        return ProviderError(self.provider, f"{self.url}: {mask(message, self.secrets)}", **kwargs)

    def _decode(self, data: str) -> dict[str, Any]:
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            raise self.error(f"malformed stream: event is not JSON: {_preview(data)}") from None
        if not isinstance(chunk, dict):
            raise self.error(f"malformed stream: event is not a JSON object: {_preview(data)}")
        if chunk.get("error"):
            raise self.error(f"server error in stream: {_error_message(chunk)}")
        return chunk

    def _chunk_events(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        if isinstance(chunk.get("usage"), dict):
            self.reported_usage = _usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self.error(f"malformed stream: choices is not a list: {_preview(chunk)}")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # only the first choice is the answer (n > 1 is not requested)
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise self.error(f"malformed stream: delta is not an object: {_preview(chunk)}")
            # Checked before any work: most chunks are one token of text (the hot path).
            if delta.get("tool_calls"):
                self._add_tool_call_pieces(delta["tool_calls"])
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.parts.append(content)
                events.append(TextDelta(content))
        return events

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
            call = self._tool_calls.setdefault(index, _CallPieces())
            # llama_cpp.server repeats the id and name in every piece: the first one wins.
            if not call.id:
                call.id = _text(piece.get("id"))
            function = piece.get("function")
            if isinstance(function, dict):
                if not call.name:
                    call.name = _text(function.get("name"))
                call.arguments.append(_text(function.get("arguments")))

    def _finish_tool_calls(self) -> list[ProviderEvent]:
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

    async def _read_json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = json.loads(await response.aread())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self.error("malformed response: the body is not JSON") from None
        except httpx.TransportError as exc:
            raise self.error(f"response cut short ({_describe(exc)})", retryable=True) from None
        if not isinstance(body, dict):
            raise self.error("malformed response: the body is not a JSON object")
        if body.get("error"):
            raise self.error(f"server error: {_error_message(body)}")
        return body

    def _whole_completion(self, body: dict[str, Any]) -> list[ProviderEvent]:
        events = self._chunk_events(body)
        events.extend(self._finish_tool_calls())
        return events


async def _sse_reads(stream: AsyncIterator[bytes], decoder: SSEDecoder) -> AsyncIterator[list[str]]:
    """The data of the server-sent events completed by each network read, as they arrive."""
    async for chunk in stream:
        if datas := decoder.feed(chunk):
            yield datas
    if datas := decoder.end():
        yield datas


def _merge_text(events: list[ProviderEvent]) -> list[ProviderEvent]:
    """Consecutive `TextDelta`s joined into one (other events keep their place)."""
    if len(events) < 2:
        return events
    merged: list[ProviderEvent] = []
    texts: list[str] = []
    for event in events:
        if type(event) is TextDelta:
            texts.append(event.text)
            continue
        if texts:
            merged.append(TextDelta("".join(texts)))
            texts = []
        merged.append(event)
    if texts:
        merged.append(TextDelta("".join(texts)))
    return merged


async def _drain(stream: AsyncIterator[Any]) -> None:
    """Read what follows `[DONE]` (normally just the end of the body), briefly.

    A response read to its end gives its connection back to the pool for the next turn;
    one abandoned half-read is closed. A server that keeps the stream open after `[DONE]`
    only costs the connection, not the turn.
    """
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in stream:
                pass
    except (TimeoutError, httpx.TransportError):
        pass


# --- errors ----------------------------------------------------------------------------------


def _http_error(provider: str, settings: _Settings, response: httpx.Response) -> ProviderError:
    status = response.status_code
    url = _display_url(settings.url)
    if status == 401:
        return ProviderError(
            provider,
            f"{url}: authentication failed (HTTP 401); check options.api_key or $OPENAI_API_KEY",
        )
    if status == 429:
        retry_after = _retry_after(response.headers)
        wait = f", retry after {retry_after:g}s" if retry_after is not None else ""
        return ProviderError(
            provider,
            f"{url}: rate limited{wait} (HTTP 429)",
            retryable=True,
            retry_after=retry_after,
        )
    if status >= 500:
        return ProviderError(provider, f"{url}: server error (HTTP {status})", retryable=True)
    if status < 400:
        location = _display_url(response.headers.get("location", "")) or "nowhere"
        return ProviderError(
            provider,
            f"{url}: unexpected redirect (HTTP {status}) to {location}; "
            "set base_url to the final address",
        )
    message = mask(_server_message(response), settings.secrets)
    if status == 404:
        message += " (check base_url: it usually ends in /v1)"
    return ProviderError(provider, f"{url}: bad request (HTTP {status}): {message}")


def _transport_error(
    provider: str, url: str, exc: httpx.TransportError, read_timeout: float
) -> ProviderError:
    shown = _display_url(url)
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        reason = f"timed out after {CONNECT_TIMEOUT:g}s"
    elif isinstance(exc, httpx.TimeoutException):
        return ProviderError(
            provider, f"{shown}: no response within {read_timeout:g}s (read timeout)"
        )
    elif isinstance(exc, httpx.ConnectError):
        reason = _connect_reason(exc)
    else:
        return ProviderError(provider, f"{shown}: {_describe(exc)}", retryable=True)
    return ProviderError(provider, f"cannot connect to {shown}: {reason}", retryable=True)


def _connect_reason(exc: httpx.ConnectError) -> str:
    """Why a connection failed, from the OS error under httpx's (often vague) message."""
    causes = _causes(exc)
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in causes):
        return "host name not found"
    if any(isinstance(c, ssl.SSLError) for c in causes):
        return f"TLS error ({_describe(causes[-1])})"
    detail = " ".join(str(c) for c in causes).lower()
    if "refused" in detail:
        return "connection refused"
    if any(s in detail for s in ("name or service", "nodename", "getaddrinfo", "name resolution")):
        return "host name not found"
    if "certificate" in detail or "ssl" in detail:
        return f"TLS error ({_describe(exc)})"
    return _describe(causes[-1])


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first (bounded)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10 and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`."""
    if milliseconds := headers.get("retry-after-ms"):
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(round(when.timestamp() - time.time(), 3), 0.0)


def _body_text(response: httpx.Response) -> str:
    """The error body read by `_send` ("" when the connection dropped before it came)."""
    try:
        return response.text
    except httpx.ResponseNotRead:
        return ""


def _server_message(response: httpx.Response) -> str:
    text = _body_text(response)
    try:
        body = json.loads(text) if text else None
    except json.JSONDecodeError:
        body = None
    if isinstance(body, dict) and (message := _error_message(body)):
        return message
    text = " ".join((body if isinstance(body, str) else text).split())
    return _preview(text) if text else response.reason_phrase or "no details"


def _error_message(body: dict[str, Any]) -> str:
    """The human part of the error bodies servers send (OpenAI, vLLM, Ollama, FastAPI)."""
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("msg") or json.dumps(error)
    candidate = error or body.get("message") or body.get("detail") or ""
    if not isinstance(candidate, str):
        candidate = json.dumps(candidate)
    return _preview(" ".join(candidate.split()))


def mask(text: str, secrets: list[str]) -> str:
    """`text` with every secret replaced by `***` (servers sometimes echo the key)."""
    return Masker(secrets).mask(text)


def _display_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    if parsed.userinfo:
        return str(parsed.copy_with(username=None, password=None))
    return url


def _describe(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _MAX_SERVER_MESSAGE else text[: _MAX_SERVER_MESSAGE - 1] + "…"


# --- small helpers ---------------------------------------------------------------------------


def _read_timeout(turn_timeout: float | None) -> float:
    """Seconds to wait for the next bytes: the step's turn timeout, else 300 s."""
    return turn_timeout if turn_timeout and turn_timeout > 0 else DEFAULT_READ_TIMEOUT


def _usage(usage: dict[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = usage.get(key)
        return int(value) if _is_number(value) else 0

    return Usage(input_tokens=count("prompt_tokens"), output_tokens=count("completion_tokens"))


def _text(value: Any) -> str:
    """A string field of a stream event; servers sometimes send null or an object."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process. Building one reads the system's CA bundle
    (~20 ms); a notebook kernel running many workflows should pay that once, not per run."""
    return ssl.create_default_context()
