"""`awf run` in a real pseudo-terminal: typing, Ctrl-C during a reply, ending the chat."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import only_run_id
from tests.support.terminal import spawn, transcript

pytestmark = pytest.mark.pty

CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello there
    options:
      delay_ms: 30
      replies:
        - "first reply"
        - "a very long second reply that keeps streaming word after word after word after word after word so there is time to interrupt it"
        - "third reply"
    on_success: done
  done: {type: terminal, message: "bye"}
"""


def test_chat_in_a_terminal_with_ctrl_c_during_reply(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "chat.yaml").write_text(CHAT)
    child = spawn(tmp_path, storage, "run", "chat.yaml")
    try:
        child.expect_exact("> hello there")  # the step's prompt, shown as the first message
        child.expect_exact("first reply")
        child.expect_exact("> ")
        child.sendline("tell me more")
        child.expect_exact("word after word")  # the long reply is streaming…
        child.sendintr()  # Ctrl-C: interrupt this reply only
        child.expect_exact("reply interrupted")
        child.expect_exact("> ")
        child.sendline("and then?")
        child.expect_exact("third reply")
        child.expect_exact("> ")
        child.sendline("")  # an empty line ends the conversation
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    screen = transcript(child)
    # The terminal echoed the typed line as it was typed; awf does not print it again.
    assert screen.count("tell me more") == 1, screen

    state = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
    conv = state["steps"]["chat"]["conversation"]
    assert [t["role"] for t in conv["turns"]] == ["user", "assistant"] * 3
    second = conv["turns"][3]
    assert second["interrupted"] is True
    assert second["content"].startswith("a very long second reply")
    assert len(second["content"]) < len(
        "a very long second reply that keeps streaming word after word after word after word "
        "after word so there is time to interrupt it"
    )
    assert conv["turns"][5]["content"] == "third reply"
    assert conv["stopped_by"] == "user_exit"
    # the person's lines went to the readline history file in the storage dir
    assert "tell me more" in (storage / "input_history").read_text()


def test_ctrl_c_at_the_prompt_cancels_the_run(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "chat.yaml").write_text(CHAT)
    child = spawn(tmp_path, storage, "run", "chat.yaml")
    try:
        child.expect_exact("first reply")
        child.expect_exact("> ")
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 130
    run_id = only_run_id(storage)
    state = json.loads((storage / "runs" / run_id / "state.json").read_text())
    assert state["status"] == "cancelled"
    assert state["steps"]["chat"]["conversation"]["stopped_by"] == "cancelled"
    assert f"awf resume {run_id}" in transcript(child)


def test_missing_required_input_is_asked_for_on_a_terminal(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "greet.yaml").write_text(
        """
name: greet
inputs:
  - {name: who, required: true, description: whom to greet}
states:
  initial: hello
  hello: {type: step, command: 'echo "hello $who"', on_success: done}
  done: {type: terminal}
"""
    )
    child = spawn(tmp_path, storage, "run", "greet.yaml")
    try:
        child.expect_exact("who (whom to greet): ")
        child.sendline("Ada")
        child.expect_exact("hello Ada")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_with_stdout_redirected_the_prompt_stays_on_the_terminal(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "chat.yaml").write_text(CHAT)
    env = {**os.environ, "AWF_STORAGE": str(storage), "TERM": "xterm"}
    env.pop("NO_COLOR", None)  # colours on: they must still not reach the file
    child = pexpect.spawn(
        "/bin/sh",
        ["-c", f"{sys.executable} -m awf_nb.cli run chat.yaml > out.txt"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    child.logfile_read = io.StringIO()
    try:
        child.expect_exact("> ")  # the prompt is on the terminal (stderr)
        child.sendline("tell me more")
        child.expect_exact("> ")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    saved = (tmp_path / "out.txt").read_text()
    assert "first reply" in saved and "a very long second reply" in saved
    assert "\x1b" not in saved, repr(saved)  # no colour codes in a file
    assert "> hello there" in saved  # the conversation, as a transcript
    assert not any(line == "> " for line in saved.splitlines()), repr(saved)


EXCHANGE = """
name: exchange
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    prompt: write a haiku
    options:
      delay_ms: 40
      replies:
        - "a very long first draft that keeps streaming word after word after word after word after word after word"
        - "second draft about snow"
        - "third draft"
    conversation:
      with:
        name: reviewer
        provider: scripted
        options: {replies: ["APPROVED"]}
      until: 'message == "APPROVED"'
      max_turns: 5
    on_success: done
  done: {type: terminal, message: "{{.states.draft.Output}}"}
"""


def test_ctrl_c_during_an_agent_exchange_lets_the_person_speak(tmp_path: Path):
    storage = tmp_path / "storage"
    (tmp_path / "exchange.yaml").write_text(EXCHANGE)
    child = spawn(tmp_path, storage, "run", "exchange.yaml")
    try:
        child.expect_exact("word after word")  # the writer's first draft is streaming
        child.sendintr()  # Ctrl-C: pause the exchange, the person speaks next
        child.expect_exact("reply interrupted")
        child.expect_exact("> ")
        child.sendline("make it about snow")
        child.expect_exact("second draft about snow")
        child.expect_exact("reviewer: ")  # the partner's message, labelled
        child.expect_exact("APPROVED")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    state = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
    conv = state["steps"]["draft"]["conversation"]
    said = [(t["role"], t["speaker"], t["content"]) for t in conv["turns"]]
    assert said[2] == ("user", "person", "make it about snow")
    assert said[3:] == [
        ("assistant", "", "second draft about snow"),
        ("user", "reviewer", "APPROVED"),
    ]
    assert conv["stopped_by"] == "condition"
