"""A small, real OpenAI-compatible HTTP/1.1 server for tests and benchmarks.

It listens on 127.0.0.1 (a free port), answers `POST /v1/chat/completions` with
Server-Sent Events exactly like the real protocol (chunked transfer encoding, `data:`
lines, a usage chunk, `data: [DONE]`) and `GET /v1/models`. Each test scripts what the
next requests get (`server.script(Reply.text("hi"), Reply.error(401))`) and reads back
every request it received (`server.requests[-1].body["messages"]`).

    with OpenAIServer() as server:
        server.script(Reply.counted(100, delay=0.01), Reply.rate_limited(retry_after="2"))
        ...  # point a client at server.base_url

From a shell (for benchmarks), every request gets N tokens:

    python -m tests.support.openai_server --tokens 2000 [--delay-ms 0] [--port 0]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_NAME = "awf-test-model"


@dataclass
class Reply:
    """What the server answers to one chat completion request.

    `tokens` are streamed one SSE event each, `delay` seconds apart. `status` other than
    200 sends `body` as a JSON error. `cut_after` drops the connection after that many
    tokens (no end of body, no `[DONE]`); `end_without_done` ends the body cleanly but
    without `[DONE]`. `raw` is sent verbatim as the SSE body. `as_json` answers with one
    JSON completion instead of a stream (servers that ignore `stream: true`).
    `headers_after` waits that many seconds before the response starts (a model reading a
    long prompt); `hold_open` keeps the body open that long after `[DONE]`. `repeat`
    streams one `delta` again and again after the tokens (`repeat_times`, None: until the
    client goes away) — a hostile server that never ends its answer (`Reply.endless`).

    Tool calls follow the text: `tool_calls` ({name, arguments}) each in three pieces the
    way OpenAI streams them (ids `call_0`, `call_1`, …), or `tool_call_chunks`, the
    `delta.tool_calls` list of each chunk as given (see `Reply.calls`: pieces split across
    chunks, calls interleaved). `as_json` puts `tool_calls` in the completion's message.
    """

    tokens: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " server."])
    delay: float = 0.0
    usage: bool = True
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # {name, arguments}
    tool_call_chunks: list[list[dict[str, Any]]] = field(default_factory=list)
    cut_after: int | None = None
    end_without_done: bool = False
    raw: str | None = None
    content_type: str = "text/event-stream; charset=utf-8"
    as_json: bool = False
    headers_after: float = 0.0
    hold_open: float = 0.0
    repeat: dict[str, Any] | None = None
    repeat_times: int | None = None
    finish_reason: str | None = None  # else "tool_calls" or "stop"; "length": cut at max_tokens

    @property
    def finish(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls or self.tool_call_chunks else "stop"

    @classmethod
    def endless(cls, delta: dict[str, Any], times: int | None = None, **kwargs: Any) -> Reply:
        """`delta` (e.g. a tool call's next arguments) streamed `times` times, or forever."""
        return cls(tokens=[], repeat=delta, repeat_times=times, **kwargs)

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        """`text` streamed word by word (each token keeps its leading space)."""
        words = text.split(" ")
        tokens = [words[0]] + [" " + w for w in words[1:]]
        return cls(tokens=[t for t in tokens if t], **kwargs)

    @classmethod
    def counted(cls, count: int, delay: float = 0.0, **kwargs: Any) -> Reply:
        """`count` tokens " t0", " t1", … sent `delay` seconds apart."""
        return cls(tokens=[f" t{i}" for i in range(count)], delay=delay, **kwargs)

    @classmethod
    def calls(cls, *calls: dict[str, str], pieces: int = 3, text: str = "", **kwargs: Any) -> Reply:
        """Parallel tool calls ({name, arguments, id?}) streamed the hard way: each call's
        id and name in its first piece, its arguments cut into `pieces` parts, the calls'
        pieces interleaved (call 0, call 1, call 0, …) and, from the third chunk on, two
        pieces sharing one chunk. Indices are given; ids default to `call_<index>`."""
        streams: list[list[dict[str, Any]]] = []
        for index, call in enumerate(calls):
            arguments = call.get("arguments", "")
            size = -(-len(arguments) // pieces) if arguments else 1
            parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
            head = {"index": index, "id": call.get("id", f"call_{index}"), "type": "function"}
            first = {**head, "function": {"name": call["name"], "arguments": ""}}
            rest = [{"index": index, "function": {"arguments": part}} for part in parts]
            streams.append([first, *rest])
        interleaved = [
            piece for row in itertools.zip_longest(*streams) for piece in row if piece is not None
        ]
        chunks = [[piece] for piece in interleaved[:2]]
        rest = interleaved[2:]
        chunks += [rest[i : i + 2] for i in range(0, len(rest), 2)]
        return (
            cls.text(text, tool_call_chunks=chunks, **kwargs)
            if text
            else cls(tokens=[], tool_call_chunks=chunks, **kwargs)
        )

    @classmethod
    def error(cls, status: int, message: str = "", **kwargs: Any) -> Reply:
        """An OpenAI-style JSON error `{"error": {"message": ...}}` with that status."""
        body = {"error": {"message": message or f"error {status}", "type": "test_error"}}
        return cls(status=status, body=body, **kwargs)

    @classmethod
    def rate_limited(cls, retry_after: str | None = None) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls.error(429, "Rate limit reached", headers=headers)

    @classmethod
    def malformed(cls) -> Reply:
        """A stream whose second event is not JSON."""
        good = _chunk({"content": "Hel"}, finish_reason=None)
        return cls(raw=f"data: {json.dumps(good)}\n\ndata: {{not json\n\ndata: [DONE]\n\n")


@dataclass
class RecordedRequest:
    """One request the server received (headers lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    connection: int  # which TCP connection carried it (1, 2, …): shows connection reuse
    usage_sent: dict[str, int] | None = None
    received_at: float = 0.0  # time.perf_counter() when its headers had been read


@dataclass
class StreamRecord:
    """How one streamed response went, from the server's side."""

    tokens_sent: int = 0
    finished: bool = False  # [DONE] and the end of the body were sent
    client_gone_at: float | None = None  # time.monotonic() when a write found the client gone
    ended: threading.Event = field(default_factory=threading.Event)


class OpenAIServer:
    """The test server: start with `start()` or `with`, script replies, read requests."""

    def __init__(self, default_reply: Reply | None = None, host: str = "127.0.0.1", port: int = 0):
        self.default_reply = default_reply or Reply()
        self.requests: list[RecordedRequest] = []
        self.streams: list[StreamRecord] = []
        self.errors: list[BaseException] = []  # unexpected failures inside the server
        self.reject_max_completion_tokens = False  # 400 like servers predating the field
        self.require_api_key: str | None = None  # 401 unless `Authorization: Bearer <key>`
        # the reply to a request's body, when none is scripted (a judge that reads what it
        # is shown); None: `default_reply`
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._connections = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What a client uses as `base_url` (ends in /v1)."""
        return f"{self.url}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests (then `default_reply` again)."""
        with self._lock:
            self._replies.extend(replies)

    def start(self) -> OpenAIServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # slow streams notice it between tokens
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_stream_ended(self, index: int = -1, timeout: float = 5.0) -> StreamRecord:
        """The stream record once its handler finished writing (or gave up on the client)."""
        deadline = time.monotonic() + timeout
        while not self.streams and time.monotonic() < deadline:
            time.sleep(0.01)
        record = self.streams[index]
        record.ended.wait(max(deadline - time.monotonic(), 0))
        return record

    # --- used by the handler --------------------------------------------------------------

    def _next_reply(self, body: Any) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None and isinstance(body, dict):
            return self.responder(body)
        return self.default_reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _new_stream(self) -> StreamRecord:
        record = StreamRecord()
        with self._lock:
            self.streams.append(record)
        return record


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # many clients connecting at once (socketserver's default: 5)
    owner: OpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up is normal here (cancellation tests); anything else is kept."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        if error is not None:
            self.owner.errors.append(error)
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive + chunked streaming, like real servers
    disable_nagle_algorithm = True  # small SSE writes go out at once
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection_number = next(self.server.owner._connections)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `server.requests` instead."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": MODEL_NAME}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        received_at = time.perf_counter()
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        record = RecordedRequest(
            "POST",
            self.path,
            {k.lower(): v for k, v in self.headers.items()},
            body,
            self.connection_number,
            received_at=received_at,
        )
        owner._record(record)
        if self.path.partition("?")[0].rstrip("/") != "/v1/chat/completions":  # a query is fine
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if rejection := self._rejection(body):
            self._send_json(*rejection)
            return
        self._answer(owner._next_reply(body), body, record)

    def _rejection(self, body: Any) -> tuple[int, dict[str, Any]] | None:
        owner = self.server.owner
        key = owner.require_api_key
        if key is not None and self.headers.get("authorization") != f"Bearer {key}":
            return 401, {"error": {"message": "Incorrect API key provided", "type": "auth"}}
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, {"error": {"message": "'messages' is required"}}
        if owner.reject_max_completion_tokens and "max_completion_tokens" in body:
            message = "Unrecognized request argument supplied: max_completion_tokens"
            return 400, {"error": {"message": message, "type": "invalid_request_error"}}
        return None

    def _answer(self, reply: Reply, body: dict[str, Any], record: RecordedRequest) -> None:
        if reply.status != 200:
            self._send_json(reply.status, reply.body, reply.headers)
            return
        usage = {
            "prompt_tokens": prompt_tokens(body["messages"]),
            "completion_tokens": len(reply.tokens),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        record.usage_sent = usage
        if reply.as_json:
            self._send_json(200, _completion(reply, usage), reply.headers)
            return
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._stream(reply, usage if reply.usage and wants_usage else None)

    # --- streaming --------------------------------------------------------------------------

    def _stream(self, reply: Reply, usage: dict[str, int] | None) -> None:
        stream = self.server.owner._new_stream()
        stopping = self.server.owner._stopping
        try:
            if reply.headers_after and stopping.wait(reply.headers_after):
                raise ConnectionAbortedError("server stopping")
            self._start_stream(reply)
            if reply.raw is not None:
                self._write_chunk(reply.raw.encode())
            else:
                self._stream_events(reply, usage, stream)
                if reply.cut_after is not None:
                    self._drop_connection()
                    return
            if reply.hold_open and stopping.wait(reply.hold_open):
                raise ConnectionAbortedError("server stopping")
            self.wfile.write(b"0\r\n\r\n")  # the end of the chunked body
            stream.finished = not reply.end_without_done
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            stream.client_gone_at = time.monotonic()
            self.close_connection = True
        finally:
            stream.ended.set()

    def _start_stream(self, reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _stream_events(
        self, reply: Reply, usage: dict[str, int] | None, stream: StreamRecord
    ) -> None:
        stopping = self.server.owner._stopping
        for index, token in enumerate(reply.tokens):
            if reply.cut_after is not None and index >= reply.cut_after:
                return
            if index and reply.delay and stopping.wait(reply.delay):
                raise ConnectionAbortedError("server stopping")
            delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
            self._write_event(_chunk(delta, finish_reason=None))
            stream.tokens_sent += 1
        if reply.cut_after is not None:
            return
        if reply.repeat is not None:
            event = f"data: {json.dumps(_chunk(reply.repeat, finish_reason=None))}\n\n".encode()
            times = reply.repeat_times
            for _ in range(times) if times is not None else itertools.count():
                if stopping.is_set():
                    raise ConnectionAbortedError("server stopping")
                self._write_chunk(event)
                stream.tokens_sent += 1
        for index, call in enumerate(reply.tool_calls):
            self._write_tool_call(index, call)
        for pieces in reply.tool_call_chunks:
            self._write_event(_chunk({"tool_calls": pieces}, finish_reason=None))
        self._write_event(_chunk({}, finish_reason=reply.finish))
        if usage is not None:
            self._write_event({**_chunk_envelope(), "choices": [], "usage": usage})
        if not reply.end_without_done:
            self._write_chunk(b"data: [DONE]\n\n")

    def _write_tool_call(self, index: int, call: dict[str, str]) -> None:
        """A tool call in three pieces, the way OpenAI streams them."""
        arguments = call.get("arguments", "")
        half = len(arguments) // 2
        head = {"index": index, "id": f"call_{index}", "type": "function"}
        pieces = [
            {**head, "function": {"name": call["name"], "arguments": ""}},
            {"index": index, "function": {"arguments": arguments[:half]}},
            {"index": index, "function": {"arguments": arguments[half:]}},
        ]
        for piece in pieces:
            self._write_event(_chunk({"tool_calls": [piece]}, finish_reason=None))

    def _write_event(self, payload: dict[str, Any]) -> None:
        self._write_chunk(f"data: {json.dumps(payload)}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _drop_connection(self) -> None:
        """Close the socket mid-body, like a crashed or killed server."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def prompt_tokens(messages: list[Any]) -> int:
    """The server's "real" prompt token count: words plus 3 per message (not len/4)."""
    return sum(len(str(m.get("content", "")).split()) + 3 for m in messages if isinstance(m, dict))


def _chunk_envelope() -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_NAME,
    }


def _chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {**_chunk_envelope(), "choices": [choice]}


def _completion(reply: Reply, usage: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.tokens)}
    if reply.tool_calls:
        message["content"] = message["content"] or None
        message["tool_calls"] = [
            {"id": f"call_{index}", "type": "function", "function": call}
            for index, call in enumerate(reply.tool_calls)
        ]
    finish = reply.finish
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per reply")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="pause between tokens")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = OpenAIServer(Reply.counted(args.tokens, delay=args.delay_ms / 1000), port=args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


if __name__ == "__main__":
    main()
