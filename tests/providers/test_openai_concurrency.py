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

from awf_nb.api import arun
from awf_nb.engine.ports import Final, TurnRequest
from awf_nb.providers.http_client import loop_clients
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
