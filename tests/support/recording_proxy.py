"""A recording HTTP proxy for tests: forwards requests to a real server on 127.0.0.1 and
keeps every request body, so a test can check what a real peer was sent (e.g. the growing
message history of a conversation) while the real server does the answering."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        # Requests whose client went away before the upstream reply ended; the upstream
        # connection is closed then, as a real client's would be.
        self.abandoned: list[int] = []
        self.completed: list[int] = []
        self.changed = threading.Condition()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                number = len(proxy.requests)
                proxy.requests.append(json.loads(body or b"{}"))
                try:
                    self._forward(body)
                except (BrokenPipeError, ConnectionResetError):
                    proxy._note(proxy.abandoned, number)
                else:
                    proxy._note(proxy.completed, number)

            def _forward(self, body: bytes) -> None:
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                with (
                    httpx.Client(timeout=120) as client,
                    client.stream(
                        "POST",
                        proxy.upstream + self.path.removeprefix("/v1"),
                        content=body,
                        headers=headers,
                    ) as response,
                ):
                    self.send_response(response.status_code)
                    for key, value in response.headers.items():
                        if key.lower() not in _HOP_BY_HOP:
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in response.iter_raw():
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _note(self, outcome: list[int], number: int) -> None:
        with self.changed:
            outcome.append(number)
            self.changed.notify_all()

    def wait_until_ended(self, number: int, timeout: float = 60.0) -> str:
        """ "abandoned" or "completed": how request `number` (0-based) ended."""
        with self.changed:
            ended = self.changed.wait_for(
                lambda: number in self.abandoned or number in self.completed, timeout
            )
        assert ended, f"request {number} had not ended after {timeout:g}s"
        return "abandoned" if number in self.abandoned else "completed"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
