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

The HTTP exchange runs in a worker thread with httpx's synchronous client (design.md:
blocking work in worker threads handing results back with `loop.call_soon_threadsafe`):
each network read's events go to the event loop as one batch. It costs the loop far less
per request and per read than the asyncio HTTP stack. Cancelling the turn (Ctrl-C, a
timeout, closing the stream) shuts the connection down at once, so the server sees the
client go away and stops generating.

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
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
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
from awf_nb.providers.http_exchange import WORKERS, Exchange
from awf_nb.providers.options import OptionsModel, parse_options
from awf_nb.providers.sse import LineTooLong, SSEDecoder
from awf_nb.secrets import Masker, is_secret_header

CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 300.0
_MAX_SERVER_MESSAGE = 300
_CLOSE_SECONDS = 5.0  # aclose: how long stopped turns get to let go of their connections
_ENDPOINT = "/chat/completions"
_ENV_NAMES = ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY")


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

    @functools.cached_property
    def url(self) -> str:
        return f"{self.base_url}{_ENDPOINT}"

    @functools.cached_property
    def http_url(self) -> httpx.URL:
        """`url` parsed once for all the turns that send these settings."""
        return httpx.URL(self.url)

    @functools.cached_property
    def secrets(self) -> list[str]:
        """Values to mask in anything a server sends back: the key, credential headers."""
        credentials = [v for k, v in self.headers.items() if is_secret_header(k)]
        return [s for s in [self.api_key, *credentials] if len(s) >= 4]


class OpenAICompatibleProvider:
    """Streams chat completions; one `httpx.Client` per run (per URL scheme), created on
    first use and shared by the worker threads of the run's turns."""

    session_kind: Literal["history", "session_id"] = "history"

    def __init__(self, name: str = "openai_compatible") -> None:
        self.name = name
        # One client per URL scheme: TLS is set up (the CA bundle read) only for https.
        self._clients: dict[bool, httpx.Client] = {}
        self._clients_lock = threading.Lock()  # turns of parallel steps share the clients
        # Base URLs whose server rejected `max_completion_tokens`: they get `max_tokens`.
        self._legacy_max_tokens: set[str] = set()
        self._wire = _WireCache()
        self._exchanges: set[Exchange] = set()  # the turns streaming now
        # The last turn's options (a deep copy), environment values and settings: a step's
        # turns send the same options, and validating them is most of `_resolve`'s cost.
        self._settings: tuple[Any, tuple[str | None, ...], _Settings] | None = None

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        settings = self._resolve(turn)
        messages, dropped = self._fit(build_messages(turn), settings)
        body = self._body(settings, turn.tools)
        reader = _StreamReader(
            self.name, _display_url(settings.url), settings.secrets, _read_timeout(turn.timeout)
        )
        for previous in list(self._exchanges):  # one still draining: let it free its connection
            if previous.complete and not previous.released:
                await previous.wait_released()
        self._exchanges = {e for e in self._exchanges if not e.released}
        exchange = Exchange(asyncio.get_running_loop())
        job = functools.partial(
            self._exchange, exchange, reader, settings, body, self._wire.encode(messages),
            turn.timeout,
        )  # fmt: skip
        self._exchanges.add(exchange)
        complete = False
        try:
            WORKERS.submit(functools.partial(exchange.run, job), exchange.end)
            while (batch := await exchange.next_batch()) is not None:
                for event in batch:
                    yield event
            complete = True
        finally:
            if not complete:
                # An unfinished exchange (cancellation, aclose, errors) has its connection
                # shut down: the server sees the client go away and stops generating.
                exchange.close()
        yield reader.usage(messages)
        if dropped:
            yield truncation_notice(dropped, settings.context_window)
        yield Final(reader.text, cut=reader.cut)

    async def aclose(self) -> None:
        """Stop the turns still streaming, then close the run's HTTP clients (and their
        pooled connections)."""
        exchanges = [e for e in self._exchanges if not e.released]
        self._exchanges = set()
        for exchange in exchanges:
            exchange.close()
        if exchanges:  # their workers let go of the connections before the clients close
            waiting = asyncio.gather(*(e.wait_released() for e in exchanges))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiting, _CLOSE_SECONDS)
        with self._clients_lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()

    # --- the exchange, in a worker thread -----------------------------------------------------

    def _exchange(
        self,
        exchange: Exchange,
        reader: _StreamReader,
        settings: _Settings,
        body: dict[str, Any],
        messages: list[bytes],
        turn_timeout: float | None,
    ) -> None:
        """POST the turn and hand its events to the loop as they are read."""
        response = self._send(settings, body, messages, turn_timeout, exchange)
        try:
            exchange.attach(response.extensions.get("network_stream"))
            for events, complete in reader.batches(response, exchange.draining):
                if complete:  # read to its end: the connection goes back to the pool first
                    exchange.detach()
                    response.close()
                exchange.post(events, complete=complete)
        finally:
            exchange.detach()  # from here on, the connection may serve another exchange
            response.close()  # an unfinished response drops its connection

    def _http(self, url: str) -> httpx.Client:
        """The client for `url`. Plain http never speaks TLS (redirects are not followed),
        so its client skips the TLS context; https always verifies."""
        secure = not url.lower().startswith("http://")
        with self._clients_lock:
            client = self._clients.get(secure)
            if client is None:
                client = self._clients[secure] = httpx.Client(
                    timeout=httpx.Timeout(DEFAULT_READ_TIMEOUT, connect=CONNECT_TIMEOUT),
                    verify=_tls_context() if secure else False,
                )
        return client

    def _send(
        self,
        settings: _Settings,
        body: dict[str, Any],
        messages: list[bytes],
        turn_timeout: float | None,
        exchange: Exchange,
    ) -> httpx.Response:
        """POST the turn (`body` with `messages`, the pieces of the messages' JSON array);
        returns the open streaming response or raises `ProviderError`."""
        read_timeout = _read_timeout(turn_timeout)
        timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT)
        headers = self._headers(settings)
        client = self._http(settings.url)
        for _attempt in range(2):
            try:
                request = client.build_request(
                    "POST",
                    settings.http_url,
                    content=_encode_body(body, messages),
                    headers=headers,
                    timeout=timeout,
                    extensions={"trace": exchange.trace},
                )
            except httpx.InvalidURL as exc:
                raise self._error(f"base_url is not a valid URL ({exc})") from None
            try:
                response = client.send(request, stream=True)
            except httpx.TransportError as exc:
                raise _transport_error(self.name, settings.url, exc, read_timeout) from None
            if response.is_success:
                return response
            with contextlib.suppress(httpx.TransportError):  # the status says enough
                response.read()
            response.close()
            exchange.detach()
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
            body["tools"] = self._wire.tools(tools)
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
        """The turn's settings: the last turn's again when its options and environment
        variables are equal to this one's."""
        env_values = tuple(
            turn.env[name] if name in turn.env else os.environ.get(name) for name in _ENV_NAMES
        )
        cached = self._settings
        if cached is not None and cached[1] == env_values and cached[0] == turn.options:
            return cached[2]
        env = {
            name: value
            for name, value in zip(_ENV_NAMES, env_values, strict=True)
            if value is not None
        }
        settings = self._settings_from(turn.options, env)
        import copy  # only when the options change

        try:  # a copy, so that options changed in place are seen as changed
            self._settings = (copy.deepcopy(turn.options), env_values, settings)
        except Exception:  # options that cannot be copied are read afresh every turn
            self._settings = None
        return settings

    def _settings_from(self, raw: Any, env: Mapping[str, str]) -> _Settings:
        options = parse_options(self.name, OpenAIOptions, raw)
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


@dataclass(frozen=True, slots=True)
class _Encoded:
    """A body value already turned into JSON (`_WireCache.tools`)."""

    json: bytes


def _encode_body(body: dict[str, Any], messages: list[bytes]) -> bytes:
    """`body` as JSON with the messages array (`_WireCache.encode`'s pieces) as its second
    key (after `model`, where a body built as one dict has it), joined in one copy.
    `_Encoded` values go in as they are."""
    first, *rest = body.items()
    pieces = [_json(dict([first]))[:-1], b',"messages":[', *messages, b"]"]
    for key, value in rest:
        encoded = value.json if type(value) is _Encoded else _json(value)
        pieces += [b",", _json(key), b":", encoded]
    pieces.append(b"}")
    return b"".join(pieces)


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
        # b"," + the message's JSON, by id() of the message: the pieces of an array's
        # content are then looked up in one pass, without commas to put between them.
        self._encoded: dict[int, bytes] = {}
        self._messages: dict[int, Message] = {}  # keeps each one alive: its id stays its own
        self._tools: tuple[list[ToolSpec], _Encoded] | None = None  # the last tool list's

    def tools(self, tools: list[ToolSpec]) -> _Encoded:
        """The JSON of the request's `tools` array. A step offers the same tools request
        after request (their schemas are kilobytes): made again only when the list holds
        other specs."""
        cached = self._tools
        if (
            cached is None
            or len(cached[0]) != len(tools)
            or any(a is not b for a, b in zip(cached[0], tools, strict=True))
        ):
            encoded = _Encoded(_json([wire_tool(tool) for tool in tools]))
            cached = self._tools = (list(tools), encoded)
        return cached[1]

    def __len__(self) -> int:
        return len(self._encoded)

    def encode(self, messages: list[Message]) -> list[bytes]:
        """The JSON of `messages` in Chat Completions form, as the pieces of an array's
        content (commas included) for `_encode_body` to join."""
        pieces: list[bytes | None] = list(map(self._encoded.get, map(id, messages)))
        if not all(pieces):  # new messages (an encoding is never empty)
            for index, piece in enumerate(pieces):
                if piece is None:
                    message = messages[index]
                    piece = pieces[index] = b"," + _json(wire_message(message))
                    self._encoded[id(message)] = piece
                    self._messages[id(message)] = message
            if len(self._encoded) > 2 * len(messages) + 64:
                kept = zip(messages, pieces, strict=True)
                self._encoded = {id(m): p for m, p in kept}  # type: ignore[misc]
                self._messages = {id(m): m for m in messages}
        if pieces:
            pieces[0] = pieces[0][1:]  # type: ignore[index]
        return pieces  # type: ignore[return-value]


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
        self.cut = False  # finish_reason "length": the reply was cut at max_tokens

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

    def batches(
        self, response: httpx.Response, draining: Callable[[], None]
    ) -> Iterator[tuple[list[ProviderEvent], bool]]:
        """The events of the response as they are read, in the worker thread: (events,
        False) per network read, then (the last events, True) once `[DONE]` came and the
        rest of the response was drained (`draining` is called first; see `_drain`)."""
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if content_type == "application/json":
            # Some servers ignore `stream: true` and answer with one JSON completion.
            yield self._whole_completion(self._read_json(response)), False
            return
        if content_type != "text/event-stream":
            raise self.error(
                "malformed stream: expected Content-Type text/event-stream, "
                f"got {content_type or 'none'!r}"
            )
        decoder = SSEDecoder()
        stream = response.iter_bytes()
        try:
            for datas in _sse_reads(stream, decoder):
                events: list[ProviderEvent] = []
                for data in datas:
                    if data.strip() == "[DONE]":
                        draining()
                        _drain(stream)
                        yield events + self._finish_tool_calls(), True
                        return
                    if data.strip():
                        events.extend(self._chunk_events(self._decode(data)))
                if events:
                    yield events, False
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
        raise self.error("stream ended before [DONE]", retryable=True)

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
            if choice.get("finish_reason") == "length":
                self.cut = True
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

    def _read_json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = json.loads(response.read())
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


def _sse_reads(stream: Iterator[bytes], decoder: SSEDecoder) -> Iterator[list[str]]:
    """The data of the server-sent events completed by each network read, as they arrive."""
    for chunk in stream:
        if datas := decoder.feed(chunk):
            yield datas
    if datas := decoder.end():
        yield datas


def _drain(stream: Iterator[bytes]) -> None:
    """Read what follows `[DONE]` (normally just the end of the body), briefly.

    A response read to its end gives its connection back to the pool for the next turn;
    one abandoned half-read is closed. A server that keeps the stream open after `[DONE]`
    only costs the connection and at most `DRAIN_SECONDS`: the loop then shuts the
    connection down (`Exchange.draining`).
    """
    with contextlib.suppress(httpx.TransportError):
        for _ in stream:
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


@functools.lru_cache(maxsize=64)
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
