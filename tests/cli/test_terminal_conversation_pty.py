"""A conversation in a real pseudo-terminal reads as one: who says what, lines that break
between words, one `^C` for one Ctrl-C, and a resumed conversation that shows what was
said before the next turn."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import only_run_id
from tests.support.terminal import spawn, transcript

pytestmark = pytest.mark.pty

LONG = (
    "Rain falls softly on the quiet garden while the old cat watches every drop slide "
    "down the window and dreams of sunny afternoons"
)
CHAT = f"""
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello there
    options:
      delay_ms: 20
      replies:
        - "{LONG}"
        - "a very long second reply that keeps streaming word after word after word after word after word so there is time to interrupt it"
        - "third reply"
    on_success: done
  done: {{type: terminal, message: "bye"}}
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    return ANSI.sub("", text).replace("\r\n", "\n")


def test_who_says_what_is_plain_and_lines_break_between_words(tmp_path: Path) -> None:
    (tmp_path / "chat.yaml").write_text(CHAT)
    child = spawn(tmp_path, tmp_path / "storage", "run", "chat.yaml", color=True,
                  dimensions=(30, 40))  # fmt: skip
    try:
        child.expect_exact("sunny afternoons")
        child.expect_exact("> ")
        child.sendline("tell me more")
        child.expect_exact("> ")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    screen = transcript(child)

    # The step's prompt is the workflow's, dimmed, not a line typed at "> ".
    assert "\x1b[2mprompt: hello there\x1b[0m" in screen
    assert "> hello there" not in plain(screen)
    # Replies are labelled with the step's agent; the person's prompt and typing have
    # their own colours (bold cyan "> ", then cyan).
    assert "\x1b[1;32mchat: \x1b[0mRain falls" in screen
    assert "\x1b[1;36m> \x1b[0;36m" in screen
    # The long reply broke between words at 40 columns (the label takes the first 6).
    text = plain(screen)
    start = text.index("chat: Rain")
    lines = text[start : text.index("afternoons", start) + len("afternoons")].split("\n")
    assert len(lines) > 2 and all(len(line) <= 40 for line in lines), lines
    assert " ".join(lines) == "chat: " + LONG


def test_one_ctrl_c_shows_one_caret_c(tmp_path: Path) -> None:
    (tmp_path / "chat.yaml").write_text(CHAT)
    child = spawn(tmp_path, tmp_path / "storage", "run", "chat.yaml")
    try:
        child.expect_exact("> ")
        child.sendline("go on")
        child.expect_exact("word after word")
        child.sendintr()
        child.expect_exact("reply interrupted")
        child.expect_exact("> ")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    screen = transcript(child)
    assert screen.count("^C") == 1, screen  # the terminal's own echo of the key, once


def test_resume_shows_the_conversation_so_far_before_the_next_turn(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "chat.yaml").write_text(CHAT)
    child = spawn(tmp_path, storage, "run", "chat.yaml")
    try:
        child.expect_exact("> ")
        child.sendline("tell me more")
        child.expect_exact("word after word")
        child.expect_exact("> ")
        child.sendintr()  # at the prompt: the run is cancelled
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 130
    run_id = only_run_id(storage)

    child = spawn(tmp_path, storage, "resume", run_id)
    try:
        child.expect_exact("(earlier in chat)")
        child.expect_exact("> ")
        shown = plain(child.before)
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    said = [line for line in shown.split("\n") if ": " in line]
    assert said[0] == "prompt: hello there", shown
    assert said[1].startswith("chat: Rain falls softly"), shown
    assert "you: tell me more" in said, shown
    assert any(line.startswith("chat: a very long second reply") for line in said), shown
    state = json.loads((storage / "runs" / run_id / "state.json").read_text())
    assert state["status"] == "completed"
