"""Many conversations in flight in one process: no thread each, one pool of connections per
event loop, and nothing left open when the runs end (benchmarks/concurrency.py measures the
figures; these tests hold the properties)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import textwrap
import threading
from pathlib import Path

import pytest

from awf_nb.api import arun
from awf_nb.engine.ports import Final, TurnRequest
from awf_nb.errors import ProviderError, UserError
from awf_nb.providers.http_client import MAX_CONNECTIONS_VARIABLE, loop_clients
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.store import Store
from tests.support import collect
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import until

CONVERSATIONS = 40


def awf_threads() -> set[str]:
    """This process's threads but the test server's (one per connection it serves)."""
    server = ("process_request_thread", "serve_forever")
    return {
        f"{t.name}:{t.ident}" for t in threading.enumerate() if not any(s in t.name for s in server)
    }


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


async def test_conversations_in_flight_take_no_thread_each(openai_server: OpenAIServer) -> None:
    """40 streams at once (each run its own provider, as 40 runs would): while all of
    them are streaming, the process has no thread more than before."""
    openai_server.default_reply = Reply.counted(30, delay=0.02)
    before = awf_threads()
    providers = [OpenAICompatibleProvider() for _ in range(CONVERSATIONS)]
    request = TurnRequest(prompt="Hi", options={"base_url": openai_server.base_url, "model": "m"})
    streams = [asyncio.create_task(collect(p.stream(request))) for p in providers]
    await until(lambda: len(openai_server.requests) == CONVERSATIONS, "every request to arrive")
    assert not all(s.done() for s in streams)
    assert awf_threads() <= before
    results = await asyncio.gather(*streams)
    assert all(events[-1] == Final("".join(f" t{i}" for i in range(30))) for events in results)
    assert len(loop_clients(asyncio.get_running_loop())) == 1  # one client, shared
    for provider in providers:
        await provider.aclose()
    assert loop_clients(asyncio.get_running_loop()) == []


async def test_runs_close_every_connection_they_opened(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """Runs share the loop's client while they overlap; when the last one ends, its
    connections are closed (the server's side of them closes too)."""
    openai_server.default_reply = Reply.counted(20, delay=0.01)
    source = tmp_path / "wf.yaml"
    source.write_text(
        textwrap.dedent(f"""
        name: chat
        states:
          initial: ask
          ask:
            type: agent
            provider: openai_compatible
            mode: conversation
            prompt: Hi
            options: {{base_url: "{openai_server.base_url}", model: m}}
            on_success: done
          done: {{type: terminal}}
        """)
    )
    before = open_sockets()
    store = Store(tmp_path / "runs")
    replies = ["one more", "and another"]
    results = await asyncio.gather(
        *(arun(source, storage=store, replies=replies, show=False) for _ in range(10))
    )
    assert [r.status for r in results] == ["completed"] * 10
    assert len(openai_server.requests) == 30
    assert loop_clients(asyncio.get_running_loop()) == []
    await until(lambda: open_sockets() <= before, "the runs' sockets to close")


async def test_connections_are_bounded_and_waiting_for_one_is_too(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWF_HTTP_MAX_CONNECTIONS bounds the loop's connections: a turn finding them all
    busy waits for one, at most its read timeout, then fails naming the limit."""
    monkeypatch.setenv(MAX_CONNECTIONS_VARIABLE, "1")
    openai_server.script(Reply.counted(100, delay=0.05))  # the one connection, held ~5 s
    first, second = OpenAICompatibleProvider(), OpenAICompatibleProvider()
    options = {"base_url": openai_server.base_url, "model": "m"}
    try:
        holding = asyncio.create_task(collect(first.stream(TurnRequest("Hi", options=options))))
        await until(lambda: len(openai_server.requests) == 1, "the first request")
        waiting = TurnRequest("Hi", options=options, timeout=0.3)
        with pytest.raises(ProviderError) as caught:
            await collect(second.stream(waiting))
        assert caught.value.message == (
            f"openai_compatible: {openai_server.base_url}/chat/completions: no free connection "
            "within 0.3s (1 in use, the most this process opens: $AWF_HTTP_MAX_CONNECTIONS)"
        )
        assert caught.value.retryable
        assert len(openai_server.requests) == 1  # the second never went out
        holding.cancel()
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_bad_connection_limit_is_a_clear_error(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_CONNECTIONS_VARIABLE, "lots")
    provider = OpenAICompatibleProvider()
    options = {"base_url": openai_server.base_url, "model": "m"}
    with pytest.raises(UserError, match=r"AWF_HTTP_MAX_CONNECTIONS must be a whole number >= 1 "):
        await collect(provider.stream(TurnRequest("Hi", options=options)))
    await provider.aclose()
