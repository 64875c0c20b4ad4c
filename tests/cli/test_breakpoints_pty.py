"""Breakpoints in a real terminal: `awf run --break-before/--break-after`, the
`[c]ontinue [s]tep [e]dit [k]skip [a]bort >` prompt, `$EDITOR` for edit, AWF's
`--interactive --breakpoint`, and `kill -9` at a pause then `awf resume` pausing again."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import only_run_id, run_awf
from tests.support.terminal import spawn, transcript

pytestmark = pytest.mark.pty

WF = """
name: debug-me
states:
  initial: make
  make: {type: command, command: "echo made", on_success: ask}
  ask: {type: agent, provider: scripted, prompt: "say {{.states.make.Output}}", on_success: show}
  show: {type: command, command: "touch {{.inputs.marker}}; echo shown", on_success: done}
  done: {type: terminal, message: "all done"}
inputs:
  - {name: marker, default: ran.txt}
"""
CHOICES = "[c]ontinue [s]tep [e]dit [k]skip [a]bort > "


def _state(storage: Path, run_id: str) -> dict:
    return json.loads((storage / "runs" / run_id / "state.json").read_text())


def test_edit_in_editor_then_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(WF)
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nprintf 'from the editor\\n' > \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))  # awf's environment is this process's
    child = spawn(
        tmp_path, storage, "run", "wf.yaml", "--break-after", "make", "--break-before", "show"
    )
    try:
        child.expect_exact("paused after step make (command)")
        child.expect_exact("output: made")
        child.expect_exact(CHOICES)
        child.sendline("x")  # not a choice: asked again
        child.expect_exact("answer c, s, e, k or a")
        child.expect_exact(CHOICES)
        child.sendline("e")
        child.expect_exact("output: from the editor")  # shown again, as edited
        child.expect_exact(CHOICES)
        child.sendline("c")
        child.expect_exact("paused before step show (command)")
        child.expect_exact("command: touch ran.txt; echo shown")
        child.expect_exact("state make: from the editor")
        child.expect_exact(CHOICES)
        child.sendline("k")
        child.expect_exact("output of the skipped step > ")
        child.sendline("mocked")
        child.expect_exact("all done")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    state = _state(storage, only_run_id(storage))
    assert state["steps"]["make"]["output"] == "from the editor"
    assert "from the editor" in state["steps"]["ask"]["output"]  # the next step read it
    assert state["steps"]["show"]["output"] == "mocked"
    assert not (tmp_path / "ran.txt").exists()  # skipped: never ran
    assert state["paused"] == {}


@pytest.fixture
def no_editor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDITOR", raising=False)


def test_awf_interactive_steps_and_edits_a_line(tmp_path: Path, no_editor: None):
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(WF)
    child = spawn(tmp_path, storage, "run", "wf.yaml", "--interactive", "--breakpoint", "ask")
    try:
        child.expect_exact("paused before step ask (agent)")
        child.expect_exact("prompt: say made")
        child.expect_exact(CHOICES)
        child.sendline("e")  # no $EDITOR: a line is read
        child.expect_exact("new value > ")
        child.sendline("say edited")
        child.expect_exact("prompt: say edited")
        child.expect_exact(CHOICES)
        child.sendline("s")  # run it, and pause before the next step
        child.expect_exact("paused before step show (command)")
        child.expect_exact(CHOICES)
        child.sendline("continue")
        child.expect_exact("all done")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    state = _state(storage, only_run_id(storage))
    assert "say edited" in state["steps"]["ask"]["output"]
    assert (tmp_path / "ran.txt").exists()


def test_kill_at_a_breakpoint_then_resume_pauses_there_again(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(WF)
    child = spawn(tmp_path, storage, "run", "wf.yaml", "--break-before", "show")
    try:
        child.expect_exact("paused before step show (command)")
        child.expect_exact(CHOICES)
        child.kill(signal.SIGKILL)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    run_id = only_run_id(storage)
    assert _state(storage, run_id)["paused"] == {"show": "before"}
    status = run_awf("status", run_id, "--storage", str(storage), cwd=tmp_path)
    assert f"paused    before step show (awf resume {run_id} pauses there)" in status.stdout

    again = spawn(tmp_path, storage, "resume", run_id)
    try:
        again.expect_exact("paused before step show (command)")
        again.expect_exact(CHOICES)
        again.sendline("a")  # abort: cancelled, and resumable
        again.expect_exact(f"awf resume {run_id}")
        again.expect(pexpect.EOF)
    finally:
        again.close()
    assert again.exitstatus == 130, transcript(again)
    assert not (tmp_path / "ran.txt").exists()

    last = spawn(tmp_path, storage, "resume", run_id)
    try:
        last.expect_exact("paused before step show (command)")
        last.expect_exact(CHOICES)
        last.sendline("c")
        last.expect_exact("all done")
        last.expect(pexpect.EOF)
    finally:
        last.close()
    assert last.exitstatus == 0, transcript(last)
    assert (tmp_path / "ran.txt").exists()


def test_breakpoints_without_a_terminal_are_refused(tmp_path: Path):
    (tmp_path / "wf.yaml").write_text(WF)
    done = run_awf("run", "wf.yaml", "--break-before", "show", cwd=tmp_path)
    assert done.returncode != 0
    assert "breakpoints need someone to answer the pause" in done.stderr
    done = run_awf("run", "wf.yaml", "--breakpoint", "show", cwd=tmp_path)
    assert "--breakpoint needs --interactive" in done.stderr


def test_file_breakpoints_are_ignored_without_a_terminal(tmp_path: Path):
    text = WF.replace("on_success: done}", "on_success: done, breakpoint: before}")
    (tmp_path / "wf.yaml").write_text(text)
    done = run_awf("run", "wf.yaml", "--storage", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr


PARALLEL = """
name: branches
states:
  initial: checks
  checks: {type: parallel, parallel: [one, two], on_success: done}
  one: {type: command, command: "echo one"}
  two: {type: command, command: "echo two"}
  done: {type: terminal, message: "all done"}
"""


def test_parallel_branches_pause_one_at_a_time(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(PARALLEL)
    child = spawn(
        tmp_path, storage, "run", "wf.yaml", "--break-before", "one", "--break-before", "two"
    )
    try:
        first = child.expect_exact(["paused before step one", "paused before step two"])
        child.expect_exact(CHOICES)
        child.sendline("k")
        child.expect_exact("output of the skipped step > ")
        child.sendline("given")
        # Only now is the other branch's pause shown.
        child.expect_exact("paused before step " + ("two" if first == 0 else "one"))
        child.expect_exact(CHOICES)
        child.sendline("c")
        child.expect_exact("all done")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    screen = transcript(child)
    assert screen.count(CHOICES) == 2, screen
    outputs = {k: v["output"] for k, v in _state(storage, only_run_id(storage))["steps"].items()}
    skipped = "one" if first == 0 else "two"
    assert outputs[skipped] == "given"
