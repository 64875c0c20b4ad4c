"""`%%awf --simulate-user`: an agent plays the person in a cell's conversation (IPython
shell, no kernel: the run prints like `awf run`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

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
      replies: ["First answer.", "Second answer.", "Third answer."]
    on_success: done
  done:
    type: terminal
    message: "{{.states.talk.Conversation.StoppedBy}}"
"""


def test_a_cell_with_a_simulated_user_runs_without_a_person(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    monkeypatch.delenv("AWF_NO_INTERACTIVE", raising=False)
    outcome = shell.run_cell(
        '%%awf --simulate-user "A curious person." --user-provider scripted --max-turns 2 '
        "--out simulated\n" + CHAT,
        store_history=False,
    )
    assert outcome.success, outcome.error_in_exec
    result = shell.user_ns["simulated"].result()
    conv = result.steps["talk"].conversation
    assert result.state.message == "max_turns" and conv.total_turns == 2
    assert conv.turns[-2].speaker == "user (simulated)"
