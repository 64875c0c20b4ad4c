"""The providers' tool calling through the real engine loop: a scripted model and an
OpenAI-compatible server ask for tools, the engine runs them, and the next request carries
the calls and results; a recorded run with tool calls replays without any provider."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.ports import Provider
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.runs import prepare_run
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.openai_server import OpenAIServer, Reply

SCRIPTED = """
name: notes
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Read the notes.
    tools: {builtin: [Read]}
    options:
      replies:
        - text: "Reading."
          tool_calls: [{name: Read, arguments: {file_path: notes.txt}}]
        - "The notes say: buy milk."
    on_success: done
  done: {type: terminal}
"""


def served(base_url: str) -> str:
    return textwrap.dedent(f"""
    name: notes
    states:
      initial: work
      work:
        type: agent
        provider: openai_compatible
        prompt: Read the notes.
        tools: {{builtin: [Read, Glob]}}
        options: {{base_url: "{base_url}", model: test-model}}
        on_success: done
      done: {{type: terminal}}
    """)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("buy milk\n")
    return folder


async def run(text: str, workdir: Path, provider: Provider | None, **kwargs: Any) -> Any:
    factory = (lambda name: provider) if provider is not None else None
    runner = prepare_run(
        load_text(text),
        storage=Store(workdir.parent / "storage"),
        cwd=workdir,
        sink=Collect(),
        providers=factory,
        **kwargs,
    ).runner
    return await runner.execute()


async def test_a_scripted_tool_call_runs_and_the_model_gets_the_result(workdir: Path) -> None:
    provider = ScriptedProvider()
    state = await run(SCRIPTED, workdir, provider)
    assert state.status == "completed", state.error
    assert state.steps["work"].output == "The notes say: buy milk."
    first, second = provider.received
    assert [t.name for t in first.tools] == ["Read"] and not first.continues
    assert second.continues
    assistant, result = second.history[1], second.history[2]
    assert assistant.content == "Reading."
    assert assistant.tool_calls[0].id == "call_1" == result.tool_call_id
    assert "buy milk" in result.content


async def test_a_served_run_with_tool_calls_is_recorded_and_replayed(
    workdir: Path, openai_server: OpenAIServer
) -> None:
    read = {"name": "Read", "arguments": '{"file_path": "notes.txt"}'}
    glob = {"name": "Glob", "arguments": '{"pattern": "*.txt"}'}
    openai_server.script(Reply.calls(read, glob, text="Looking."), Reply.text("Buy milk."))
    cassette = workdir.parent / "notes.cassette.jsonl"
    provider = OpenAICompatibleProvider()
    try:
        state = await run(served(openai_server.base_url), workdir, provider, record=cassette)
    finally:
        await provider.aclose()
    assert state.status == "completed", state.error
    assert state.steps["work"].output == "Buy milk."

    messages = openai_server.requests[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_0", "call_1"]
    assert messages[2]["tool_call_id"] == "call_0" and "buy milk" in messages[2]["content"]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "notes.txt"}

    turns = [json.loads(line) for line in cassette.read_text().splitlines()][1:]
    turns = [t for t in turns if t["type"] == "turn"]
    recorded = [e["tool_call"]["name"] for e in turns[0]["events"] if "tool_call" in e]
    assert recorded == ["Read", "Glob"]
    assert turns[1]["request"]["continues"] is True

    # No server this time: the turns come from the cassette, the tools run again.
    replayed = await run(served("http://127.0.0.1:9/v1"), workdir, None, replay=cassette)
    assert replayed.status == "completed", replayed.error
    assert replayed.steps["work"].output == "Buy milk."
    assert len(openai_server.requests) == 2
