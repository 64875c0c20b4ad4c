"""awf killed with -9 while an agent step's processes run — a Bash tool call's jobs (one of
them escaped with setsid), an MCP server's child, an agent CLI's child: they outlive awf
(only a direct child gets the parent-death signal), and `awf resume` stops them before
anything runs again, as it does for a command step."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.providers.cli.cli_helpers import FakeCli, wait_until_gone
from tests.support.cli import only_run_id, spawn_awf
from tests.support.processes import process_alive
from tests.support.waiting import wait_until

HOSTILE = Path(__file__).parents[1] / "tools" / "hostile_mcp_server.py"


def tool_workflow(tmp_path: Path) -> str:
    a, b, marker = tmp_path / "a.pid", tmp_path / "b.pid", tmp_path / "marker"
    command = (
        f"if [ -f {marker} ]; then echo resumed; exit 0; fi; "  # the resumed run asks again
        f"sleep 300 & echo $! > {a}; "
        f"setsid sleep 301 > /dev/null 2>&1 < /dev/null & echo $! > {b}; "
        f"touch {marker}; wait"
    )
    call = {"id": "c1", "name": "Bash", "arguments": json.dumps({"command": command})}
    mcp = {
        "name": "h",
        "command": sys.executable,
        "args": [str(HOSTILE), "child", str(tmp_path / "mcp-child.pid")],
    }
    step = {
        "type": "agent",
        "provider": "scripted",
        "prompt": "go",
        "options": {"replies": [{"tool_calls": [call]}, "done"]},
        "tools": {"builtin": ["Bash"], "mcp": [mcp]},
        "on_success": "end",
    }
    workflow = {
        "name": "tooljobs",
        "states": {"initial": "work", "work": step, "end": {"type": "terminal"}},
    }
    return json.dumps(workflow)


def recorded_groups(storage: Path) -> list[dict[str, object]]:
    runs = list((storage / "runs").glob("*/state.json")) if (storage / "runs").is_dir() else []
    if not runs:
        return []
    try:
        state = json.loads(runs[0].read_text())
    except ValueError:
        return []
    return state["steps"].get("work", {}).get("process_groups", [])


def started_child(fake: FakeCli) -> int | None:
    """The pid of the child the fake CLI started, once its record is written whole."""
    try:
        records = fake.records()
    except ValueError:  # being written
        return None
    return records[0]["child_pid"] if records else None


def kill_awf_only(proc) -> None:
    """SIGKILL awf itself, not its process group (its children are in groups of their own
    anyway): what a crash or the OOM killer does."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    proc.stderr.close()
    proc.stdin.close()


def test_resume_stops_what_a_killed_runs_tools_left(awf, storage: Path, tmp_path: Path) -> None:
    wf = tmp_path / "tools.yaml"
    wf.write_text(tool_workflow(tmp_path))
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(lambda: (tmp_path / "marker").exists(), "the Bash call's jobs started")
        # Recorded as each group starts: the MCP server's and the Bash call's.
        wait_until(lambda: len(recorded_groups(storage)) == 2, "both groups recorded")
    finally:
        kill_awf_only(proc)
    pids = [int((tmp_path / name).read_text()) for name in ("a.pid", "b.pid", "mcp-child.pid")]
    try:
        assert all(process_alive(pid) for pid in pids)  # they outlived awf
        run_id = only_run_id(storage)
        resumed = awf("resume", run_id, "--yes", timeout=120)
        assert "were still running from the interrupted run" in resumed.stderr + resumed.stdout
        assert wait_until_gone(pids, 10) == []
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_resume_stops_what_a_killed_agent_cli_left(
    awf, storage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCli(tmp_path / "fake", tmp_path / "bin", tmp_path / "work")
    for folder in (fake.folder, fake.bin_dir, fake.workdir):
        folder.mkdir()
    fake.install("claude")
    fake.plan({"sample": "claude-tool.jsonl", "hang": True, "spawn_child": True})
    wf = tmp_path / "cli.yaml"
    wf.write_text(
        "name: clijobs\nstates:\n  initial: ask\n"
        "  ask: {type: agent, provider: claude, prompt: hi, on_success: end}\n"
        "  end: {type: terminal}\n"
    )
    for name, value in fake.env.items():
        monkeypatch.setenv(name, value)
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(lambda: started_child(fake) is not None, "the fake claude started")
    finally:
        kill_awf_only(proc)
    child = started_child(fake)
    assert child is not None
    try:
        assert process_alive(child)
        fake.plan({"sample": "claude-tool.jsonl"})
        awf("resume", only_run_id(storage), timeout=120)
        assert wait_until_gone([child], 10) == []
    finally:
        if process_alive(child):
            os.kill(child, signal.SIGKILL)
