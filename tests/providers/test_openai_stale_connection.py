"""A pooled connection the server closes just as it is reused (its keep-alive ran out at
that moment): the request got no byte of an answer, so it is sent once more on a new
connection, as HTTP clients do. A server that does it again is an error that says so.

The server is a real TCP server on 127.0.0.1 that speaks just enough HTTP/1.1: each
connection answers its first request with a streamed reply and keeps the connection open
(no `Connection: close`), then reads the next request on that connection and closes it
without answering — deterministically what the keep-alive race looks like to a client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from awf_nb.engine.ports import Final, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from tests.support import collect, of_type

pytestmark = pytest.mark.usefixtures("no_openai_environment")


def _sse(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


@dataclass
class ClosingServer:
    """Answers the first request of each connection; closes a reused one unanswered
    (every time when `always_close` is set: a server that never answers)."""

    always_close: bool = False
    connections: int = 0
    requests: int = 0
    answered: int = 0
    closed_unanswered: int = 0
    port: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)

    async def _read_request(self, reader: asyncio.StreamReader) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        length = next(
            (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")),
            0,
        )  # fmt: skip
        await reader.readexactly(length)
        self.requests += 1
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = True
        try:
            while await self._read_request(reader):
                if first and not self.always_close:
                    writer.write(_sse("hello"))
                    await writer.drain()
                    self.answered += 1
                    first = False
                    continue
                self.closed_unanswered += 1
                break
        finally:
            writer.close()

    async def __aenter__(self) -> ClosingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


def _turn(port: int) -> TurnRequest:
    return TurnRequest(
        prompt="Hi",
        options={"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "api_key": "k"},
    )


async def _text(events: AsyncIterator[object]) -> str:
    (final,) = of_type(await collect(events), Final)
    return final.text


async def test_a_reused_connection_closed_unanswered_is_sent_again_on_a_new_one() -> None:
    provider = OpenAICompatibleProvider()
    try:
        async with ClosingServer() as server:
            assert await _text(provider.stream(_turn(server.port))) == "hello"
            # The pooled connection is reused: the server closes it unanswered, and the
            # request is sent again on a new connection, which answers.
            assert await _text(provider.stream(_turn(server.port))) == "hello"
            assert (server.requests, server.answered, server.closed_unanswered) == (3, 2, 1)
            assert server.connections == 2
    finally:
        await provider.aclose()


async def test_a_server_that_never_answers_is_an_error_after_one_resend() -> None:
    provider = OpenAICompatibleProvider()
    try:
        async with ClosingServer(always_close=True) as server:
            with pytest.raises(ProviderError) as caught:
                await collect(provider.stream(_turn(server.port)))
            assert server.requests == 2  # the request and its one resend
            assert "the server closed the connection without answering" in caught.value.message
            assert caught.value.retryable
    finally:
        await provider.aclose()
