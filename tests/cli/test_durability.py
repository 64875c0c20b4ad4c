"""Nothing is lost when `awf run` is killed: state files, `awf status`, `awf resume`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from awf_nb.store import Store
from tests.support.cli import only_run_id, spawn_awf
from tests.support.processes import process_alive
from tests.support.waiting import wait_until

MULTI_STEP = """
name: multi
states:
  initial: first
  first:
    type: step
    command: echo ran >> {trace}; echo first
    on_success: slow
  slow:
    type: step
    command: if [ -f {marker} ]; then echo resumed; else touch {marker}; sleep 60; fi
    on_success: last
  last:
    type: step
    command: echo "last after {{{{.states.first.Output}}}}"
    on_success: done
  done: {{type: terminal, message: finished}}
"""


def test_sigkill_mid_run_then_status_and_resume(awf, storage: Path, tmp_path: Path):
    trace, marker = tmp_path / "trace", tmp_path / "marker"
    wf = tmp_path / "multi.yaml"
    wf.write_text(MULTI_STEP.format(trace=trace, marker=marker))
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(marker.exists, "the marker file")
        os.killpg(proc.pid, signal.SIGKILL)  # awf and the command it was running
    finally:
        proc.wait(10)
    run_id = only_run_id(storage)

    status = awf("status", run_id)
    assert status.returncode == 0, status.stderr
    assert "status    interrupted at step slow" in status.stdout
    assert "completed first" in status.stdout

    state = json.loads(awf("status", run_id, "--json").stdout)
    assert state["steps"]["first"]["output"] == "first"
    assert state["current_step"] == "slow"

    resumed = awf("resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} was interrupted at step slow" in resumed.stderr  # resume says so
    assert "resumed" in resumed.stdout
    assert "last after first" in resumed.stdout
    assert trace.read_text().count("ran") == 1  # the finished step was not run again
    final = json.loads(awf("status", run_id, "--json").stdout)
    assert final["status"] == "completed"
    assert final["message"] == "finished"

    again = awf("resume", run_id)
    assert again.returncode == 1
    assert "already completed" in again.stderr
    rerun = awf("resume", run_id, "--from", "last")
    assert rerun.returncode == 0, rerun.stderr
    assert trace.read_text().count("ran") == 1


CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello
    options: {replies: ["first reply", "second reply", "third reply"]}
    on_success: done
  done: {type: terminal}
"""


def read_until(stream, text: str, timeout: float = 20.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        if time.monotonic() > deadline:
            pytest.fail(f"{text!r} never appeared; got {seen!r}")
        line = stream.readline()
        if not line:
            pytest.fail(f"stream ended before {text!r}; got {seen!r}")
        seen += line
    return seen


def test_kill_after_two_turns_then_resume_continues_conversation(awf, storage, tmp_path):
    wf = tmp_path / "chat.yaml"
    wf.write_text(CHAT)
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        read_until(proc.stdout, "first reply")
        proc.stdin.write("tell me more\n")
        proc.stdin.flush()
        read_until(proc.stdout, "second reply")
        store = Store(storage)

        def second_reply_saved() -> bool:
            conversation = store.load_state(only_run_id(storage)).steps["chat"].conversation
            return conversation is not None and conversation.total_turns == 2

        wait_until(second_reply_saved, "the state file to hold the second reply")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    run_id = only_run_id(storage)
    status = awf("status", run_id)
    assert "conversation: 2 turns" in status.stdout
    assert re.search(r"agent \[turn 1 · ~\d+ tokens · \d+\.\d\d s\]: first reply", status.stdout)
    assert "you: tell me more" in status.stdout
    assert re.search(r"agent \[turn 2 · .*\]: second reply", status.stdout)

    resumed = awf("resume", run_id, input="and finally?\n\n")
    assert resumed.returncode == 0, resumed.stderr
    assert "third reply" in resumed.stdout
    assert "first reply" not in resumed.stdout  # earlier turns are not replayed on screen
    state = json.loads(awf("status", run_id, "--json").stdout)
    conv = state["steps"]["chat"]["conversation"]
    assert conv["total_turns"] == 3
    assert [t["content"] for t in conv["turns"]] == [
        "hello",
        "first reply",
        "tell me more",
        "second reply",
        "and finally?",
        "third reply",
    ]
    assert conv["stopped_by"] == "user_exit"


def test_resume_refuses_a_run_still_alive(awf, storage, tmp_path):
    marker = tmp_path / "marker"
    wf = tmp_path / "slow.yaml"
    wf.write_text(
        f"name: slow\nstates:\n  initial: a\n  a: {{type: step, command: 'touch {marker}; sleep 30', on_success: d}}\n"
        "  d: {type: terminal}\n"
    )
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(marker.exists, "the marker file")
        result = awf("resume", only_run_id(storage))
        assert result.returncode == 1
        assert "is still running" in result.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_kill_at_the_prompt_then_resume_keeps_the_output_and_tokens(awf, storage, tmp_path):
    wf = tmp_path / "chat.yaml"
    wf.write_text(CHAT)
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        read_until(proc.stdout, "first reply")
        run_id = only_run_id(storage)
        state_file = storage / "runs" / run_id / "transcript.jsonl"
        wait_until(lambda: '"first reply"' in state_file.read_text(), "the reply saved")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    shown = awf("status", run_id)
    assert "interrupted" in shown.stdout, shown.stdout
    history = awf("history")
    assert "interrupted" in history.stdout
    assert "running" not in history.stdout
    assert run_id in awf("history", "-s", "interrupted").stdout

    resumed = awf("resume", run_id, "--reply", "", "--json")
    assert resumed.returncode == 0, resumed.stderr
    step = json.loads(resumed.stdout)["steps"]["chat"]
    assert step["output"] == "first reply"
    assert step["tokens_used"] > 0


def test_a_locked_history_says_so(awf, storage, tmp_path):
    import sqlite3

    wf = tmp_path / "one.yaml"
    wf.write_text("name: one\nstates:\n  initial: d\n  d: {type: terminal}\n")
    assert awf("run", str(wf)).returncode == 0
    holder = sqlite3.connect(storage / "history.db")
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the file
    try:
        result = awf("run", str(wf), timeout=120)
    finally:
        holder.rollback()
        holder.close()
    assert result.returncode == 4
    assert "is locked by another process" in result.stderr
    assert "move it away" not in result.stderr


def test_a_command_left_running_by_a_killed_run_is_stopped_on_resume(awf, storage, tmp_path):
    starts, pidfile = tmp_path / "starts", tmp_path / "pid"
    wf = tmp_path / "slow.yaml"
    # The step records each start and the pid of a background worker that outlives the
    # shell: the parent-death signal reaches the shell only, the group is left behind.
    wf.write_text(
        "name: slow\nstates:\n  initial: a\n"
        f"  a: {{type: step, command: 'echo x >> {starts}; (sleep 60 & echo $! > {pidfile}; wait) ; sleep 60', on_success: d}}\n"
        "  d: {type: terminal}\n"
    )
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(pidfile.exists, "the background worker")
        wait_until(lambda: pidfile.read_text().strip() != "", "its pid")
        # The group is checkpointed just after the command starts: wait for that write
        # (under load the worker can start first), then kill awf.
        wait_until(lambda: _recorded_group(storage) > 0, "the process group in the state")
        os.kill(proc.pid, signal.SIGKILL)  # awf only: its command's group lives on
    finally:
        proc.wait(10)
    worker = int(pidfile.read_text())
    state = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
    assert state["steps"]["a"]["process_group"] > 0
    os.kill(worker, 0)  # still alive: an orphan

    resumed = spawn_awf("resume", only_run_id(storage), storage=storage, cwd=tmp_path)
    try:
        wait_until(lambda: starts.read_text().count("x") == 2, "the step to start again")
        wait_until(lambda: not process_alive(worker), "the orphan to be stopped")
    finally:
        os.killpg(resumed.pid, signal.SIGKILL)
        _, err = resumed.communicate(timeout=10)
        again = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
        if again["steps"]["a"]["process_group"]:  # the resumed run's own command
            with contextlib.suppress(ProcessLookupError):
                os.killpg(again["steps"]["a"]["process_group"], signal.SIGKILL)
    assert "still running from the interrupted run" in err


def test_a_command_dies_with_a_killed_awf(awf, storage, tmp_path):
    """The parent-death signal: kill -9 of awf takes its running command down at once (a
    command's own background jobs are dealt with on resume, test above)."""
    pidfile = tmp_path / "pid"
    wf = tmp_path / "wait.yaml"
    wf.write_text(
        "name: wait\nstates:\n  initial: a\n"
        f"  a: {{type: step, command: 'echo $$ > {pidfile}; exec sleep 60', on_success: d}}\n"
        "  d: {type: terminal}\n"
    )
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", "the command")
        command = int(pidfile.read_text())
        assert process_alive(command)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    wait_until(lambda: not process_alive(command), "the command to die with awf")


def _recorded_group(storage: Path) -> int:
    """Step a's process group as the state file holds it (0 until it is written)."""
    try:
        state = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
    except (OSError, ValueError, StopIteration, AssertionError):
        return 0
    return int((state.get("steps", {}).get("a") or {}).get("process_group") or 0)


EXCHANGE = """
name: exchange
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    prompt: write
    options: {replies: ["w1", "w2", "w3", "w4", "w5"], delay_ms: 50}
    conversation:
      with:
        name: reviewer
        provider: scripted
        options: {replies: ["r1 is slow to say", "r2 is slow to say", "r3 is slow to say"], delay_ms: 60}
      max_turns: 4
    on_success: done
  done: {type: terminal, message: "{{.states.draft.Output}}"}
"""


def test_sigkill_mid_exchange_then_resume_continues_where_it_stopped(
    awf, storage: Path, tmp_path: Path
):
    wf = tmp_path / "exchange.yaml"
    wf.write_text(EXCHANGE)
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:

        def reviewer_spoke_twice() -> bool:
            runs = list((storage / "runs").glob("*/transcript.jsonl"))
            return bool(runs) and runs[0].read_text().count('"speaker":"reviewer"') >= 2

        wait_until(reviewer_spoke_twice, "the reviewer's second message")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    run_id = only_run_id(storage)
    resumed = awf("resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "w4" in resumed.stdout
    state = json.loads(awf("status", run_id, "--json").stdout)
    conv = state["steps"]["draft"]["conversation"]
    said = [(t["speaker"], t["content"]) for t in conv["turns"]]
    assert said == [
        ("", "write"),
        ("", "w1"),
        ("reviewer", "r1 is slow to say"),
        ("", "w2"),
        ("reviewer", "r2 is slow to say"),
        ("", "w3"),
        ("reviewer", "r3 is slow to say"),
        ("", "w4"),
    ]
    assert conv["total_turns"] == 4 and conv["stopped_by"] == "max_turns"
    assert state["message"] == "w4"


def test_status_shows_the_exchange_with_speakers_turns_tokens_and_time(
    awf, storage: Path, tmp_path: Path
):
    wf = tmp_path / "exchange.yaml"
    wf.write_text(
        EXCHANGE.replace("delay_ms: 50", "delay_ms: 0").replace("delay_ms: 60", "delay_ms: 0")
    )
    assert awf("run", str(wf)).returncode == 0
    status = awf("status", only_run_id(storage)).stdout
    lines = [line.strip() for line in status.splitlines() if "]: " in line or "you: " in line]
    assert lines[0] == "you: write"
    # The scripted provider reports no usage: the figures are estimates (~).
    assert re.fullmatch(r"agent \[turn 1 · ~\d+ tokens · \d+\.\d\d s\]: w1", lines[1])
    assert re.fullmatch(r"reviewer \[~\d+ tokens · \d+\.\d\d s\]: r1 is slow to say", lines[2])
    assert re.fullmatch(r"agent \[turn 4 · .*\]: w4", lines[-1])
    assert "conversation: 4 turns, stopped by max_turns" in status


CHAT_WITH_TOOLS = """
name: tidy
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: tidy up
    tools: {{builtin: [Bash]}}
    options:
      replies:
        - tool_calls: [{{name: Bash, arguments: {{command: "echo one > one.txt"}}}}]
        - tool_calls: [{{name: Bash, arguments: {{command: "echo two > two.txt"}}}}]
        - tool_calls: [{{name: Bash, arguments: {{command: "touch {marker}; sleep 60"}}}}]
        - "All tidy."
        - "Anything else?"
    on_success: done
  done: {{type: terminal}}
"""


def test_sigkill_during_a_tool_round_keeps_the_rounds_before_it(awf, storage: Path, tmp_path: Path):
    """A conversation's tool rounds are checkpointed with its reply, not one by one: the
    rounds before a kill are still in the run (read back from the transcript), and the
    call that was running gets its "interrupted" result on resume."""
    marker = tmp_path / "marker"
    wf = tmp_path / "tidy.yaml"
    wf.write_text(CHAT_WITH_TOOLS.format(marker=marker))
    proc = spawn_awf("run", str(wf), storage=storage, cwd=tmp_path)
    try:
        wait_until(marker.exists, "the third round's command")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    run_id = only_run_id(storage)
    state = json.loads(awf("status", run_id, "--json").stdout)
    conversation = state["steps"]["chat"]["conversation"]
    assert conversation is not None, "the state file never pointed at the conversation"
    turns = conversation["turns"]
    said = [(t["role"], t["tool_call_id"] or [c["id"] for c in t["tool_calls"]]) for t in turns]
    assert said == [
        ("user", []),
        ("assistant", ["call_1"]),
        ("tool", "call_1"),
        ("assistant", ["call_1"]),
        ("tool", "call_1"),
        ("assistant", ["call_1"]),
    ]
    assert (tmp_path / "one.txt").exists() and (tmp_path / "two.txt").exists()

    resumed = awf("resume", run_id, input="\n")
    assert resumed.returncode == 0, resumed.stderr
    state = json.loads(awf("status", run_id, "--json").stdout)
    turns = state["steps"]["chat"]["conversation"]["turns"]
    assert [t["role"] for t in turns[:7]] == ["user", *["assistant", "tool"] * 3]
    assert turns[6]["content"].startswith("interrupted")
