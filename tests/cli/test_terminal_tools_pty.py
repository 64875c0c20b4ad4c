"""`awf run` with agent tools in a real pseudo-terminal: the `[y/N]` question of a call that
needs approval, the line each finished call leaves, and Ctrl-C during a slow command.

The model is the scripted provider, whose replies can call tools; the tools are awf's real
built-ins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import only_run_id
from tests.support.terminal import spawn, transcript
from tests.support.waiting import wait_until

pytestmark = pytest.mark.pty


CONFIRMED = """
name: tidy
states:
  initial: assist
  assist:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Write hello into a file."
    options:
      delay_ms: 20
      replies:
        - {text: "I will write it.", tool_calls: [{name: Bash, arguments: {command: "echo hi > hello.txt; echo wrote-hello"}}]}
        - "Done, hello.txt says hi."
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal, message: "bye"}
"""

SLOW = """
name: slow
states:
  initial: assist
  assist:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Build it."
    options:
      replies:
        - {text: "Building now.", tool_calls: [{name: Bash, arguments: {command: "touch started; sleep 60; echo never-printed"}}]}
        - "Stopped, as you asked."
    tools: {builtin: [Bash]}
    on_success: done
  done: {type: terminal, message: "bye"}
"""


def state_of(storage: Path) -> dict:
    return json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())


def test_a_call_is_allowed_at_the_question_and_leaves_its_line(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "tidy.yaml").write_text(CONFIRMED)
    child = spawn(tmp_path, storage, "run", "tidy.yaml")
    try:
        child.expect_exact("I will write it.")
        child.expect_exact('Allow Bash({"command": "echo hi > hello.txt; echo wrote-hello"})?')
        child.expect_exact("[y/N] ")
        assert not (tmp_path / "hello.txt").exists()  # nothing runs before the answer
        child.sendline("y")
        child.expect_exact('⚙ Bash({"command": "echo hi > hello.txt; echo wrote-hello"})')
        child.expect_exact("→ wrote-hello · ")
        child.expect_exact("Done, hello.txt says hi.")
        child.expect_exact("> ")
        child.sendline("")  # an empty line ends the conversation
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    assert (tmp_path / "hello.txt").read_text() == "hi\n"
    turns = state_of(storage)["steps"]["assist"]["conversation"]["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "assistant"]
    assert "wrote-hello" in turns[2]["content"]
    # The answer was not a message: it is not in the arrow-up history.
    history = storage / "input_history"
    assert not history.exists() or "y" not in history.read_text().split("\n")


def test_an_empty_answer_refuses_the_call(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "tidy.yaml").write_text(CONFIRMED)
    child = spawn(tmp_path, storage, "run", "tidy.yaml")
    try:
        child.expect_exact("[y/N] ")
        child.sendline("")
        child.expect_exact("→ refused")
        child.expect_exact("> ")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    assert not (tmp_path / "hello.txt").exists()
    turns = state_of(storage)["steps"]["assist"]["conversation"]["turns"]
    assert turns[2]["role"] == "tool" and "refused by the user" in turns[2]["content"]


def test_ctrl_c_at_the_question_cancels_the_run_like_at_the_prompt(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "tidy.yaml").write_text(CONFIRMED)
    child = spawn(tmp_path, storage, "run", "tidy.yaml")
    try:
        child.expect_exact("[y/N] ")
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 130, transcript(child)
    assert state_of(storage)["status"] == "cancelled"
    assert not (tmp_path / "hello.txt").exists()


def test_ctrl_c_during_a_slow_command_returns_to_the_prompt(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "slow.yaml").write_text(SLOW)
    child = spawn(tmp_path, storage, "run", "slow.yaml")
    try:
        child.expect_exact("Building now.")
        wait_until(lambda: (tmp_path / "started").exists(), "the command to start")
        child.sendintr()  # Ctrl-C: interrupt the tool call, the person has the turn
        child.expect_exact("tool call interrupted")
        child.expect_exact('⚙ Bash({"command": "touch started; sleep 60; echo never-printed"}) → ')
        child.expect_exact("interrupted")
        child.expect_exact("> ")
        child.sendline("")
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    conv = state_of(storage)["steps"]["assist"]["conversation"]
    assert [t["role"] for t in conv["turns"]] == ["user", "assistant", "tool"]
    assert "interrupted" in conv["turns"][2]["content"]
    assert "→ never-printed" not in transcript(child)


# --- only a line typed after the question answers it ------------------------------------------

ABANDONED_PROMPT = """
name: abandoned
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Anything to add?"
    timeout: 1s
    options: {replies: ["Tell me, if you like."]}
    on_success: done
    on_failure: act
  act:
    type: agent
    provider: scripted
    prompt: "Clean up."
    options:
      replies:
        - {text: "Cleaning up.", tool_calls: [{name: Bash, arguments: {command: "touch cleaned.txt"}}]}
        - "Done."
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal, message: "bye"}
"""


def test_a_line_read_for_an_abandoned_prompt_never_answers_a_question(tmp_path: Path) -> None:
    """The `> ` prompt times out, but its read goes on (a read cannot be taken back): the
    next line is that read's, even when the question is on the screen by then. It is
    kept as a message, and the question is asked again."""
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(ABANDONED_PROMPT)
    child = spawn(tmp_path, storage, "run", "wf.yaml")
    try:
        child.expect_exact("no message at the prompt within the step timeout")
        child.expect_exact('Allow Bash({"command": "touch cleaned.txt"})? [y/N] ')
        child.sendline("yes")  # read by the abandoned prompt's read
        child.expect_exact("“yes” was typed for an earlier prompt")
        child.expect_exact('Allow Bash({"command": "touch cleaned.txt"})? [y/N] ')
        assert not (tmp_path / "cleaned.txt").exists()
        child.sendline("n")
        child.expect_exact("→ refused")
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    assert not (tmp_path / "cleaned.txt").exists()


TYPED_AHEAD = """
name: ahead
states:
  initial: wait
  wait:
    type: step
    command: "while [ ! -e go ]; do sleep 0.05; done"
    on_success: act
  act:
    type: agent
    provider: scripted
    prompt: "Clean up."
    options:
      replies:
        - {text: "Cleaning up.", tool_calls: [{name: Bash, arguments: {command: "touch cleaned.txt"}}]}
        - "Done."
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal, message: "bye"}
"""


def test_a_line_typed_ahead_of_a_question_never_answers_it(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "wf.yaml").write_text(TYPED_AHEAD)
    child = spawn(tmp_path, storage, "run", "wf.yaml")
    try:
        child.expect_exact("▶ wait")
        child.sendline("yes")  # typed while a command runs, before any question
        child.expect_exact("yes")  # the terminal's own echo: it is in the input queue
        (tmp_path / "go").touch()
        child.expect_exact('Allow Bash({"command": "touch cleaned.txt"})? [y/N] ')
        child.sendline("n")
        child.expect_exact("→ refused")
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    assert not (tmp_path / "cleaned.txt").exists()
