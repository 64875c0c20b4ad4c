"""A fake LLM API server on 127.0.0.1 for driving the real agent CLIs offline.

It speaks just enough of four wire protocols for the CLIs' happy paths:
Anthropic Messages (claude), Gemini `streamGenerateContent` (gemini), OpenAI Chat
Completions (opencode, copilot) and OpenAI Responses (codex), each streamed as SSE.
Every request is recorded (method, path, JSON body) so a test can check what a CLI sent,
e.g. that a resumed turn carried the first turn's messages.

Replies are deterministic: `FAKE-REPLY n=<request number> last_user=<last user text>`.
A user message containing `FAKE_HTTP_400` gets an HTTP 400 instead.

A reply can also be a tool call, in each API's own format (Anthropic `tool_use` block,
OpenAI Responses `function_call` item, OpenAI chat `tool_calls`, Gemini `functionCall`
part): script it with `FakeLlmServer(tool_calls=[ScriptedToolCall("stamp", {...})])`.
A request that offers a tool whose name contains "stamp" and does not carry that call yet
is answered with a call to it; the request that comes back with the result (it carries the
call's id, or for Gemini a `functionResponse` of that name) gets the ordinary reply.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TRIGGER = "FAKE_HTTP_400"


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any


@dataclass(frozen=True)
class ScriptedToolCall:
    """Call the offered tool whose name contains `match`, once, with `arguments`."""

    match: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCallReply:
    """The tool call the fake answers with: the offered tool's full name and a call id.

    `search`: codex offers MCP tools only through its `tool_search` tool: the call is then
    a `tool_search_call` looking for `name`, and the real call comes once it is found."""

    name: str
    call_id: str
    arguments: dict[str, Any]
    namespace: str | None = None
    search: bool = False


@dataclass
class FakeLlmServer:
    """Start with `start()`, stop with `stop()`; `url` is `http://127.0.0.1:PORT`."""

    requests: list[RecordedRequest] = field(default_factory=list)
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _replies: int = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeLlmServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def record(self, method: str, path: str, body: Any) -> int:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body))
            if method == "POST":
                self._replies += 1
            return self._replies

    def posts(self, path_part: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and path_part in r.path]


@dataclass(frozen=True)
class OfferedTool:
    name: str
    namespace: str | None = None  # OpenAI Responses: a tool inside a `namespace` tool


def offered_tools(body: Any) -> list[OfferedTool]:
    """The tools a request offers (any of the four shapes), including those a Responses
    `tool_search_output` item made available (codex defers MCP tools behind tool_search)."""
    if not isinstance(body, dict):
        return []
    found: list[OfferedTool] = []

    def walk(node: Any, namespace: str | None) -> None:
        if isinstance(node, list):
            for value in node:
                walk(value, namespace)
        elif isinstance(node, dict):
            if node.get("type") == "namespace" and isinstance(node.get("name"), str):
                walk(node.get("tools"), node["name"])
                return
            if isinstance(node.get("name"), str):
                found.append(OfferedTool(node["name"], namespace))
            for value in node.values():
                if isinstance(value, dict | list):
                    walk(value, namespace)

    walk(body.get("tools"), None)
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            walk(item.get("tools"), None)
    return found


def carries_call(body: Any, call: ToolCallReply) -> bool:
    """Whether a request already carries `call` (and so, the CLI being sane, its result)."""
    if call.call_id in request_texts(body):
        return True
    # Gemini sends the id back only if the API gave one; match the response's name too.
    found: list[bool] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            response = node.get("functionResponse")
            if isinstance(response, dict) and response.get("name") == call.name:
                found.append(True)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return bool(found)


def scripted_call(body: Any, script: list[ScriptedToolCall]) -> ToolCallReply | None:
    """The tool call to answer `body` with, if the script has one left for it."""
    offered = offered_tools(body)
    searchable = any(
        isinstance(tool, dict) and tool.get("type") == "tool_search"
        for tool in (body.get("tools") if isinstance(body, dict) else None) or []
    )
    for number, entry in enumerate(script):
        tool = next((t for t in offered if entry.match in t.name), None)
        if tool is None:
            search = ToolCallReply(entry.match, f"search_fake_{number}", {}, search=True)
            if searchable and not carries_call(body, search):
                return search
            continue
        call = ToolCallReply(tool.name, f"call_fake_{number}", entry.arguments, tool.namespace)
        if not carries_call(body, call):
            return call
    return None


def request_texts(body: Any) -> list[str]:
    """Every string found anywhere in a request body (to search for earlier messages)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found


def last_user_text(body: Any) -> str:
    """The text of the last user message, for any of the four request shapes."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages") or body.get("contents") or body.get("input") or []
    if isinstance(messages, str):
        return messages
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        text = _content_text(message.get("content", message.get("parts")))
        if text:
            return text
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    # The CLIs put their own context blocks first; the user's words are the last text part.
    texts = [
        part["text"]
        for part in content
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]
    return texts[-1] if texts else ""


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLlmServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:
        self.fake.record("HEAD", self.path, None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.fake.record("GET", self.path, None)
        self._send_json(200, {"data": [], "models": [], "object": "list"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        number = self.fake.record("POST", self.path, body)
        user = last_user_text(body).strip().splitlines()[-1:] or [""]
        if ERROR_TRIGGER in user[0]:
            error = {"message": "fake 400", "type": "invalid_request_error", "code": None}
            self._send_json(400, {"error": error})
            return
        reply = f"FAKE-REPLY n={number} last_user={user[0]}"
        stream = not isinstance(body, dict) or body.get("stream", True) is not False
        call = scripted_call(body, self.fake.tool_calls)
        if "/messages" in self.path:
            if call:
                self._anthropic_tool_call(body, call)
            else:
                self._anthropic(body, reply, stream)
        elif ":streamGenerateContent" in self.path or ":generateContent" in self.path:
            if call:
                self._gemini_tool_call(call, ":streamGenerateContent" in self.path)
            else:
                self._gemini(reply, ":streamGenerateContent" in self.path)
        elif self.path.rstrip("/").endswith("/responses"):
            if call:
                self._responses_tool_call(body, call)
            else:
                self._responses(body, reply)
        elif "/chat/completions" in self.path:
            if call:
                self._chat_tool_call(body, call, stream)
            else:
                self._chat(body, reply, stream)
        else:
            self._send_json(404, {"error": {"message": f"no fake for {self.path}"}})

    # --- protocols ---------------------------------------------------------------------

    def _anthropic(self, body: Any, reply: str, stream: bool) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        usage = {"input_tokens": 12, "output_tokens": 7}
        message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model}
        if not stream:
            content = [{"type": "text", "text": reply}]
            full = {**message, "content": content, "stop_reason": "end_turn", "usage": usage}
            self._send_json(200, full)
            return
        start = {**message, "content": [], "stop_reason": None, "usage": usage}
        half = len(reply) // 2
        events = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            *[
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
                for piece in (reply[:half], reply[half:])
            ],
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 7},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._send_sse((f"event: {name}\ndata: {json.dumps(data)}" for name, data in events))

    def _gemini(self, reply: str, stream: bool) -> None:
        half = len(reply) // 2
        usage = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}

        def chunk(text: str, last: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {
                "content": {"parts": [{"text": text}], "role": "model"},
                "index": 0,
            }
            if last:
                candidate["finishReason"] = "STOP"
            return {"candidates": [candidate], "usageMetadata": usage}

        if not stream:
            self._send_json(200, chunk(reply, True))
            return
        chunks = [chunk(reply[:half], False), chunk(reply[half:], True)]
        self._send_sse(f"data: {json.dumps(c)}" for c in chunks)

    def _chat(self, body: Any, reply: str, stream: bool) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": model}
        usage = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
        if not stream:
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._send_json(
                200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
            return
        half = len(reply) // 2

        def chunk(delta: dict[str, Any], finish: str | None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            data = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            return f"data: {json.dumps(data)}"

        tail = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        self._send_sse(
            [
                chunk({"role": "assistant", "content": reply[:half]}, None),
                chunk({"content": reply[half:]}, None),
                chunk({}, "stop"),
                f"data: {json.dumps(tail)}",
                "data: [DONE]",
            ]
        )

    def _responses(self, body: Any, reply: str) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        item_id = "msg_fake"
        text_part = {"type": "output_text", "text": reply, "annotations": []}
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [text_part],
        }
        usage = {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 19,
        }
        response = {"id": "resp_fake", "object": "response", "model": model, "output": []}
        in_progress = {**item, "status": "in_progress", "content": []}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0, "item": in_progress},
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": reply,
            },
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [item], "usage": usage},
            },
        ]
        self._send_sse(f"event: {e['type']}\ndata: {json.dumps(e)}" for e in events)

    # --- tool calls, in each protocol ----------------------------------------------------

    def _anthropic_tool_call(self, body: Any, call: ToolCallReply) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        usage = {"input_tokens": 12, "output_tokens": 7}
        start = {
            "id": "msg_fake_tool", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "usage": usage,
        }  # fmt: skip
        block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        events = [
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
            {"type": "message_stop"},
        ]
        self._send_sse(f"event: {e['type']}\ndata: {json.dumps(e)}" for e in events)

    def _gemini_tool_call(self, call: ToolCallReply, stream: bool) -> None:
        usage = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}
        part = {"functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments}}
        candidate = {
            "content": {"parts": [part], "role": "model"},
            "index": 0,
            "finishReason": "STOP",
        }
        data = {"candidates": [candidate], "usageMetadata": usage}
        if not stream:
            self._send_json(200, data)
            return
        self._send_sse([f"data: {json.dumps(data)}"])

    def _responses_tool_call(self, body: Any, call: ToolCallReply) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        arguments = json.dumps(call.arguments)
        item: dict[str, Any] = {
            "id": "fc_fake",
            "type": "function_call",
            "status": "completed",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": arguments,
        }
        if call.namespace:
            item["namespace"] = call.namespace
        if call.search:
            item = {
                "id": "ts_fake",
                "type": "tool_search_call",
                "status": "completed",
                "call_id": call.call_id,
                "execution": "client",
                "arguments": {"query": call.name, "limit": 8},
            }
        usage = {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 19,
        }
        response = {"id": "resp_fake_tool", "object": "response", "model": model, "output": []}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress"},
            },
        ]
        if not call.search:  # a function call's arguments stream in; a search's do not
            events += [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_fake",
                    "output_index": 0,
                    "delta": arguments,
                },
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "fc_fake",
                    "output_index": 0,
                    "arguments": arguments,
                },
            ]
        events += [
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "output": [item], "usage": usage},
            },
        ]
        self._send_sse(f"event: {e['type']}\ndata: {json.dumps(e)}" for e in events)

    def _chat_tool_call(self, body: Any, call: ToolCallReply, stream: bool) -> None:
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        base = {"id": "chatcmpl-fake-tool", "created": int(time.time()), "model": model}
        usage = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        tool_call = {"id": call.call_id, "type": "function", "function": function}
        if not stream:
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._send_json(
                200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
            return

        def chunk(delta: dict[str, Any], finish: str | None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            data = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            return f"data: {json.dumps(data)}"

        tail = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        self._send_sse(
            [
                chunk({"role": "assistant", "tool_calls": [{"index": 0, **tool_call}]}, None),
                chunk({}, "tool_calls"),
                f"data: {json.dumps(tail)}",
                "data: [DONE]",
            ]
        )

    # --- plumbing ------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: Iterator[str] | list[str]) -> None:
        payload = "".join(f"{event}\n\n" for event in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
