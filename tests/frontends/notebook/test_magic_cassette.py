"""`%%awf --record PATH` / `--replay PATH` and `%awf run … --replay PATH` in an IPython
shell (no kernel, so a run prints like `awf run`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from awf_nb.frontends.notebook.handle import AwfCellError
from tests.support.notebook import cell

CHAT = """\
name: chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let's talk."
    options:
      replies: ["First answer.", "Second answer."]
    on_success: done
  done:
    type: terminal
    message: "{{.states.talk.Conversation.TotalTurns}} replies"
"""


def test_a_cell_recorded_then_replayed_prints_and_returns_the_same(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = cell(
        ip, '%%awf --record chat.jsonl --reply "Tell me more" --reply "" --out recorded\n' + CHAT
    )
    assert outcome.success, outcome.error_in_exec
    printed_by_the_recording = capsys.readouterr().out

    # No --reply: the person's messages come from the cassette, and the cell does not wait
    # for anyone to type.
    outcome = cell(ip, "%%awf --replay chat.jsonl --out replayed\n" + CHAT)

    assert outcome.success, outcome.error_in_exec
    assert capsys.readouterr().out == printed_by_the_recording
    recorded, replayed = ip.user_ns["recorded"].result(), ip.user_ns["replayed"].result()
    assert replayed.outputs == recorded.outputs
    assert replayed.state.message == "2 replies"


def test_the_line_magic_replays_a_workflow_file(ip: InteractiveShell, tmp_path: Path) -> None:
    (tmp_path / "chat.yaml").write_text(CHAT)
    assert cell(ip, "%awf run chat.yaml --record c.jsonl --reply more --reply ''").success

    outcome = cell(ip, "%awf run chat.yaml --replay c.jsonl --replay-speed 0 --out replayed")

    assert outcome.success, outcome.error_in_exec
    assert ip.user_ns["replayed"].result().state.message == "2 replies"


def test_a_cell_with_an_unusable_cassette_fails_with_one_paragraph(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = cell(ip, "%%awf --replay nowhere.jsonl\n" + CHAT)

    assert isinstance(outcome.error_in_exec, AwfCellError)
    shown = capsys.readouterr()
    assert "cassette nowhere.jsonl not found" in shown.out + shown.err
    assert "Traceback" not in shown.out + shown.err
