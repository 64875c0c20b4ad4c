"""A turn's timeout running out while a reply's tool calls run in parallel (a model on an
OpenAI-compatible server asking for eight commands at once) stops every call before the
step fails: no call's task outlives the turn, no process is left, and asyncio reports no
error nobody read ("exception was never retrieved")."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import arun
from awf_nb.engine.tool_calls import TIMED_OUT
from awf_nb.store import Store
from tests.support.mcp_peer import notes_server
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import process_alive

CALLS = 8


def commands(folder: Path) -> list[str]:
    """One command that stops at SIGTERM, the others ignore it (stopped only by SIGKILL,
    after the kill grace): the first call ends long before the others."""
    quick = f"echo $$ > {folder}/pid-0; exec sleep 300"
    stubborn = [
        f"trap '' TERM; echo $$ > {folder}/pid-{n}; sleep 300; echo never" for n in range(1, CALLS)
    ]
    return [quick, *stubborn]


def workflow(base_url: str, tools: dict[str, Any] | None = None) -> str:
    tools = tools or {"builtin": ["Bash"], "max_parallel": CALLS}
    return textwrap.dedent(f"""
    name: parallel-timeout
    states:
      initial: work
      work:
        type: agent
        provider: openai_compatible
        prompt: run them all
        timeout: 2s
        tools: {json.dumps(tools)}
        options: {{base_url: "{base_url}", model: test-model}}
        on_success: done
      done: {{type: terminal}}
    """)


def tool_call_tasks() -> list[str]:
    """The tasks of tool calls and of their processes that still run."""
    current = asyncio.current_task()
    running = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    names = [getattr(t.get_coro(), "__qualname__", "") for t in running]
    return [name for name in names if "_run_all" in name or "run_process" in name]


async def test_a_turn_timeout_stops_every_parallel_tool_call_before_the_step_fails(
    openai_server: OpenAIServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    asyncio.get_running_loop().set_debug(True)  # tasks and futures say where they were made
    folder = tmp_path / "pids"
    folder.mkdir()
    calls = [{"name": "Bash", "arguments": json.dumps({"command": c})} for c in commands(folder)]
    openai_server.script(Reply.calls(*calls), Reply.text("never asked"))
    source = tmp_path / "wf.yaml"
    source.write_text(workflow(openai_server.base_url))
    store = Store(tmp_path / "runs")

    result = await arun(source, storage=store, cwd=tmp_path, show=False, yes=True)

    # Right as the run returns: every call stopped, its process with it.
    assert tool_call_tasks() == []
    pids = [int(path.read_text()) for path in folder.glob("pid-*")]
    assert pids  # calls had started (on a busy machine maybe not all of them in time)
    assert [pid for pid in pids if process_alive(pid)] == []
    assert result.status == "failed"
    assert "agent turn timed out after 2.00 s" in result.error
    results = [r for r in store.read_transcript(result.run_id) if r.get("role") == "tool"]
    assert [r["content"] for r in results] == [TIMED_OUT] * CALLS
    # Futures nobody read report themselves when collected.
    gc.collect()
    await asyncio.sleep(0)
    _out, err = capfd.readouterr()
    assert "never retrieved" not in err + caplog.text
    assert "destroyed but it is pending" not in err + caplog.text


async def test_a_turn_timeout_during_parallel_mcp_calls_leaves_nothing_behind(
    openai_server: OpenAIServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    asyncio.get_running_loop().set_debug(True)
    wait = json.dumps({"seconds": 300})
    openai_server.script(
        Reply.calls(*[{"name": "notes_wait", "arguments": wait}] * CALLS), Reply.text("never")
    )
    source = tmp_path / "wf.yaml"
    tools = {"mcp": [notes_server()], "max_parallel": CALLS}
    source.write_text(workflow(openai_server.base_url, tools))
    store = Store(tmp_path / "runs")

    result = await arun(source, storage=store, cwd=tmp_path, show=False, yes=True)

    assert tool_call_tasks() == []
    assert "agent turn timed out after 2.00 s" in result.error
    results = [r for r in store.read_transcript(result.run_id) if r.get("role") == "tool"]
    assert [r["content"] for r in results] == [TIMED_OUT] * CALLS
    gc.collect()
    await asyncio.sleep(0)
    _out, err = capfd.readouterr()
    assert "never retrieved" not in err + caplog.text
