"""`awf run --simulate-user`: an agent plays the person, from the command line; bad flags
are clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import only_run_id

CHAT = """
name: chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: Hello
    options: {replies: ["What do you need?", "Sure.", "Done.", "More?", "Bye."]}
    on_success: done
  done: {type: terminal, message: "{{.states.chat.Conversation.StoppedBy}}"}
"""


def test_a_simulated_user_chats_until_max_turns(awf, storage: Path, tmp_path: Path):
    (tmp_path / "persona.md").write_text("A curious baker.")
    (tmp_path / "chat.yaml").write_text(CHAT)
    done = awf(
        "run", "chat.yaml", "--simulate-user", "@persona.md", "--user-provider", "scripted",
        "--max-turns", "3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "user (simulated): " in done.stdout  # labelled, and the scripted provider echoes
    assert done.stdout.strip().endswith("max_turns")
    state = json.loads(awf("status", only_run_id(storage), "--json").stdout)
    conv = state["steps"]["chat"]["conversation"]
    assert conv["total_turns"] == 3
    speakers = [t["speaker"] for t in conv["turns"] if t["role"] == "user"]
    assert speakers == ["", "user (simulated)", "user (simulated)"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-turns", "3"], "--user-provider and --max-turns need --simulate-user"),
        (["--simulate-user", "x", "--max-turns", "0"], "--max-turns must be between 1 and 1000"),
        (["--simulate-user", "@nowhere.md"], "--simulate-user @nowhere.md: cannot read"),
        (["--simulate-user", "  "], "the persona is empty"),
        (["--simulate-user", "x", "--user-provider", "scriptd"], 'unknown provider "scriptd"'),
    ],
)
def test_bad_simulated_user_flags_are_clear_errors(
    awf, tmp_path: Path, flags: list[str], message: str
):
    (tmp_path / "chat.yaml").write_text(CHAT)
    done = awf("run", "chat.yaml", *flags)
    assert done.returncode != 0
    assert message in done.stderr
    assert "Traceback" not in done.stderr
