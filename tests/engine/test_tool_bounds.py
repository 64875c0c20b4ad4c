"""A turn's tool rounds are bounded: the step's timeout covers the whole reply, tool calls
included (but not the person's time to confirm one), an MCP server that never answers
cannot hang a run, and a reply's calls run at most `tools.max_parallel` at a time, their
results in call order."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from awf_nb.engine.events import RunWarning
from awf_nb.engine.tool_calls import TIMED_OUT
from awf_nb.runs import prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.store import Store
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.processes import process_alive
from tests.support.tool_models import ScriptedModel

HOSTILE = Path(__file__).parents[1] / "tools" / "hostile_mcp_server.py"
HANG = 60.0  # a hang guard: before, these runs did not end


def agent_workflow(tools: dict[str, Any], timeout: str = "") -> str:
    step = textwrap.indent(
        "tools: " + json.dumps(tools) + (f"\ntimeout: {timeout}" if timeout else ""), "    "
    )
    return (
        "name: bounds\nstates:\n  initial: work\n  work:\n    type: agent\n"
        "    provider: toolmodel\n    prompt: go\n"
        f"{step}\n    on_success: done\n  done: {{type: terminal}}\n"
    )


async def run(text: str, model: ScriptedModel, workdir: Path, **kwargs: Any) -> Any:
    sink = Collect()
    kwargs.setdefault("storage", False)
    runner = prepare_run(
        load_text(text), cwd=workdir, sink=sink, providers=lambda name: model, **kwargs
    ).runner
    state = await asyncio.wait_for(runner.execute(), HANG)
    return state, sink


async def test_the_step_timeout_bounds_the_tool_calls_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = f"echo $$ > {pidfile}; exec sleep 300"
    model = ScriptedModel(
        [[("Bash", {"command": command, "timeout_seconds": 600})], "never reached"]
    )
    text = agent_workflow({"builtin": ["Bash"]}, timeout="1s")
    state, _ = await run(text, model, tmp_path, storage=Store(tmp_path / "store"))
    assert state.status == "failed"
    assert "agent turn timed out after 1s" in state.error
    assert "tool calls included" in state.error
    assert not process_alive(int(pidfile.read_text()))
    results = [t for t in state.steps["work"].conversation.turns if t.role == "tool"]
    assert [t.content for t in results] == [TIMED_OUT]


async def test_the_persons_time_to_confirm_is_not_the_agents(tmp_path: Path) -> None:
    class SlowPerson(ScriptedReader):
        async def confirm(self, question: str) -> bool:
            await asyncio.sleep(1.5)  # thinking it over, longer than the step's timeout
            return True

    model = ScriptedModel([[("Bash", {"command": "echo allowed"})], "done"])
    text = agent_workflow({"builtin": ["Bash"], "confirm": ["Bash"]}, timeout="1s")
    state, _ = await run(text, model, tmp_path, reader=SlowPerson([]))
    assert state.status == "completed", state.error
    assert state.steps["work"].output == "done"


async def test_an_mcp_server_that_never_answers_cannot_hang_the_run(tmp_path: Path) -> None:
    server = {"name": "h", "command": sys.executable, "args": [str(HOSTILE), "silent-call"]}
    model = ScriptedModel([[("h_echo", {"text": "hello"})], "it answered nothing"])
    state, _ = await run(agent_workflow({"mcp": [server], "timeout": "1s"}), model, tmp_path)
    assert state.status == "completed", state.error
    result = model.requests[1].history[-1]
    assert result.role == "tool"
    assert 'MCP server "h" did not answer echo within 1 s (tools.timeout)' in result.content


async def test_garbage_from_an_mcp_server_is_one_warning_in_the_run(tmp_path: Path) -> None:
    server = {
        "name": "h",
        "command": sys.executable,
        "args": [str(HOSTILE), "garbage", "500"],
        "env": {"LEAK": "sk-live-abcdef0123456789"},
    }
    model = ScriptedModel([[("h_echo", {"text": "x"})], "ok"])
    text = agent_workflow({"mcp": [server]})
    state, sink = await run(text, model, tmp_path, env={"API_KEY": "sk-live-abcdef0123456789"})
    assert state.status == "completed", state.error
    warnings = [e.message for e in sink.events if isinstance(e, RunWarning)]
    assert len(warnings) == 1 and "not an MCP message" in warnings[0]
    assert "sk-live" not in warnings[0]


async def test_a_replys_calls_run_at_most_max_parallel_at_once(tmp_path: Path) -> None:
    counter, peaks, lock = tmp_path / "running", tmp_path / "peaks", tmp_path / "lock"
    counter.write_text("0")
    # Each call counts itself in, notes how many run, waits a little, counts itself out.
    enter = f"n=$(($(cat {counter}) + 1)); echo $n > {counter}; echo $n >> {peaks}"
    leave = f"echo $(($(cat {counter}) - 1)) > {counter}"
    calls = [
        (
            "Bash",
            {
                "command": f"flock {lock} sh -c '{enter}'; sleep 0.2; "
                f"flock {lock} sh -c '{leave}'; echo call {number}"
            },
        )
        for number in range(12)
    ]
    model = ScriptedModel([calls, "all done"])
    text = agent_workflow({"builtin": ["Bash"], "max_parallel": 3})
    state, _ = await run(text, model, tmp_path)
    assert state.status == "completed", state.error
    peak = max(int(line) for line in peaks.read_text().split())
    assert 1 < peak <= 3
    results = [m.content for m in model.requests[1].history if m.role == "tool"]
    assert results == [f"call {number}\n" for number in range(12)]
