"""`awf fork` and `awf runs-diff` in a real terminal: a message edited, the branch's
conversation continued at the `> ` prompt, then the two runs side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import only_run_id
from tests.support.terminal import spawn, transcript

pytestmark = pytest.mark.pty


def test_fork_in_a_terminal_continues_the_branch_at_the_prompt(awf, chat, storage, tmp_path: Path):
    assert awf("run", str(chat), "--reply", "more", "--reply", "").returncode == 0
    original = only_run_id(storage)
    child = spawn(tmp_path, storage, "fork", original, "--at", "chat#3", "--edit", "rye instead")
    try:
        child.expect_exact(f"forked {original} at chat#3 as run")
        child.expect_exact("second reply")  # the agent answers the edited message
        child.expect_exact("> ")  # and the person is asked, live
        child.sendline("")  # an empty line ends the conversation
        child.expect_exact("talked")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)
    forked = next(p.name for p in (storage / "runs").iterdir() if p.name != original)
    state = json.loads((storage / "runs" / forked / "state.json").read_text())
    assert state["status"] == "completed"
    assert state["forked_from"] == {"run": original, "step": "chat", "turn": 3}

    diff = spawn(tmp_path, storage, "runs-diff", original, forked)
    try:
        diff.expect_exact("the runs diverge at chat#3")
        diff.expect(pexpect.EOF)
    finally:
        diff.close()
    assert diff.exitstatus == 0, transcript(diff)
    assert "rye instead" in transcript(diff)
