"""Text awf did not write (replies, command output, typed or piped bytes) can neither
crash a run nor drive the terminal: escape sequences are neutralised, bytes that are not
UTF-8 are replaced."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.frontends.terminal_text import terminal_safe
from tests.cli.conftest import only_run_id

ATTACKS = {
    "clear screen": "\x1b[2J\x1b[H",
    "hidden text": "\x1b[8msecret\x1b[0m",
    "window title": "\x1b]0;pwned\x07",
    "clipboard": "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "8-bit CSI": "\x9b2J",
    "carriage return": "safe\roverwritten",
}
FORBIDDEN = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]}


def test_each_attack_is_neutralised() -> None:
    for name, attack in ATTACKS.items():
        shown = terminal_safe(f"before {attack} after")
        assert not FORBIDDEN & set(shown), name
        assert shown.startswith("before ") and shown.endswith(" after"), name


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0xFF)), st.lists(st.integers(0, 200)))
def test_no_control_character_reaches_the_terminal_however_a_reply_is_split(
    text: str, cuts: list[int]
) -> None:
    out, err = io.StringIO(), io.StringIO()
    sink = TerminalSink(out=out, err=err, color=False)
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    for start, end in itertools.pairwise(points):
        sink.emit(ev.AgentText("r", "s", text[start:end]))
    sink.emit(ev.StepOutput("r", "s", text, "stdout"))
    sink.emit(ev.RunWarning("r", text, "s"))
    assert not FORBIDDEN & set(out.getvalue() + err.getvalue())


REPLY = "\x1b[2J\x1b]52;c;aGk=\x07Hello\x1b[8m hidden"
WORKFLOW = f"""
name: evil
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hi
    options: {{replies: [{json.dumps(REPLY)}, "ok"]}}
    on_success: done
  done: {{type: terminal}}
"""


def run_bytes(args: list[str | bytes], stdin: bytes, tmp_path: Path, storage: Path):
    return subprocess.run(
        [
            sys.executable.encode(),
            b"-m",
            b"awf_nb.cli",
            *[a if isinstance(a, bytes) else a.encode() for a in args],
        ],
        input=stdin,
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "AWF_STORAGE": str(storage)},
        timeout=60,
    )


def test_a_reply_cannot_drive_the_terminal_nor_awf_status(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "evil.yaml").write_text(WORKFLOW)
    result = run_bytes(["run", "evil.yaml"], b"\n", tmp_path, storage)
    assert result.returncode == 0, result.stderr
    assert b"\x1b" not in result.stdout
    assert b"Hello" in result.stdout
    status = run_bytes(["status", only_run_id(storage)], b"", tmp_path, storage)
    assert b"\x1b" not in status.stdout and b"\x07" not in status.stdout


def test_bytes_that_are_not_utf8_never_crash_a_run(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    (tmp_path / "evil.yaml").write_text(WORKFLOW)
    piped = run_bytes(["run", "evil.yaml"], b"caf\xe9 au lait\n\n", tmp_path, storage)
    assert piped.returncode == 0, piped.stderr
    state = json.loads((storage / "runs" / only_run_id(storage) / "state.json").read_text())
    assert state["status"] == "completed"
    assert state["steps"]["chat"]["conversation"]["turns"][2]["content"] == "caf\ufffd au lait"

    storage2 = tmp_path / "storage2"
    replied = run_bytes(
        ["run", "evil.yaml", "--reply", b"na\xefve", "--reply", ""], b"", tmp_path, storage2
    )
    assert replied.returncode == 0, replied.stderr
    state = json.loads((storage2 / "runs" / only_run_id(storage2) / "state.json").read_text())
    assert state["steps"]["chat"]["conversation"]["turns"][2]["content"] == "na\ufffdve"
