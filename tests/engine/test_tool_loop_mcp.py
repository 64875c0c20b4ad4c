"""Agent steps calling MCP servers (`tools.mcp`): a test server written with the official
SDK and the real `@modelcontextprotocol/server-filesystem` from npm, each started with the
step and called by the model; a server that cannot start fails the step naming it. Secrets
in tool results are masked in what the model, the frontend and the transcript get."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.events import ToolCallFinished
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.runs import prepare_run
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.mcp_peer import TEST_SERVER
from tests.support.peers import FILESYSTEM_SERVER, NPM_BIN


def step(tools: dict[str, Any], replies: list[Any], inputs: str = "") -> str:
    return textwrap.dedent(
        f"""
        name: mcp-step
        {inputs}
        states:
          initial: work
          work:
            type: agent
            provider: scripted
            prompt: Use the tools.
            tools: {json.dumps(tools)}
            options: {{replies: {json.dumps(replies)}}}
            on_success: done
          done: {{type: terminal, message: "{{{{.states.work.Output}}}}"}}
        """
    )


async def run(text: str, workdir: Path, store: Store | None = None, **kw: Any) -> Any:
    sink = Collect()
    provider = ScriptedProvider()
    runner = prepare_run(
        load_text(text), storage=store, cwd=workdir, sink=sink, providers=lambda n: provider, **kw
    ).runner
    state = await asyncio.wait_for(runner.execute(), 180)
    return state, sink, provider


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


NOTES = {"name": "notes", "command": sys.executable, "args": [str(TEST_SERVER)]}


async def test_an_agent_step_calls_an_mcp_server_written_with_the_sdk(workdir: Path):
    state, sink, provider = await run(
        step({"mcp": [NOTES]}, [call("notes_add", a=2, b=3), "It is 5."]), workdir
    )
    assert state.status == "completed", state.error
    assert state.message == "It is 5."
    [finished] = sink.of(ToolCallFinished)
    assert (finished.name, finished.result, finished.is_error) == ("notes_add", "5", False)
    sent = provider.received[1]
    assert [t.name for t in sent.tools][:2] == ["notes_add", "notes_echo"]
    assert sent.history[-1].content == "5"


async def test_secrets_in_tool_results_are_masked_everywhere(workdir: Path, store: Store):
    inputs = "inputs: [{name: api_key, default: sk-live-abcdef123456}]"
    text = step(
        {"mcp": [NOTES]}, [call("notes_echo", text="key={{.inputs.api_key}}"), "ok"], inputs
    )
    state, sink, provider = await run(text, workdir, store)
    assert state.status == "completed", state.error
    [finished] = sink.of(ToolCallFinished)
    assert finished.result == "key=***"
    assert provider.received[1].history[-1].content == "key=***"
    transcript = store.transcript_path(state.run_id).read_text()
    assert "sk-live-abcdef123456" not in transcript and "key=***" in transcript


async def test_a_server_that_cannot_start_fails_the_step_naming_it(workdir: Path):
    broken = {"name": "ghost", "command": "no-such-mcp-server-here"}
    state, _, _ = await run(step({"mcp": [broken]}, ["never asked"]), workdir)
    assert state.status == "failed"
    assert 'MCP server "ghost"' in state.error


@pytest.mark.real_cli
async def test_an_agent_step_calls_the_npm_filesystem_server(workdir: Path):
    if not FILESYSTEM_SERVER.exists():
        pytest.skip(
            f"mcp-server-filesystem not installed in {NPM_BIN} "
            "(tests/providers/cli/install_clis.sh)"
        )
    (workdir / "notes.txt").write_text("water the tomatoes\n")
    server = {
        "name": "fs",
        "command": str(FILESYSTEM_SERVER),
        "args": [str(workdir)],
        "startup_timeout": 120,  # a cold Node start on a busy machine
    }
    replies = [call("fs_read_text_file", path=str(workdir / "notes.txt")), "Tomatoes."]
    state, sink, provider = await run(step({"mcp": [server]}, replies), workdir)
    assert state.status == "completed", state.error
    [finished] = sink.of(ToolCallFinished)
    assert finished.result == "water the tomatoes\n" and not finished.is_error
    assert provider.received[1].history[-1].content == "water the tomatoes\n"
