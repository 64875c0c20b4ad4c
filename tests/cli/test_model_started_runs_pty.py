"""A workflow a *model* starts through a tool never prompts the person: `awf run` in a real
terminal, whose agent runs `awf run` on a chat workflow through its Bash tool. The inner
run gets no terminal and no input, so its conversation ends after its first reply, and
the person's terminal stays with the outer run. (A workflow run by a `call_workflow` step
does talk with the person: tests/engine/test_tool_confirmations.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest

from awf_nb.store import Store
from tests.support.terminal import spawn, transcript

pytestmark = pytest.mark.pty

PROBE = """\
"$AWF_PYTHON" -m awf_nb.cli run inner.yaml --storage inner-storage
echo "inner exit $?"
if "$AWF_PYTHON" -c 'import os; os.open("/dev/tty", os.O_RDWR)' 2>/dev/null
then echo "terminal: yes"
else echo "terminal: no"
fi
"""

INNER = """
name: inner
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: inner hello
    options: {replies: ["inner first", "inner second"]}
    on_success: done
  done: {type: terminal}
"""

OUTER = """
name: outer
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: run the inner one
    tools: {builtin: [Bash]}
    options:
      replies:
        - tool_calls: [{name: Bash, arguments: {command: "sh probe.sh"}}]
        - "outer done"
    on_success: done
  done: {type: terminal, message: "bye"}
"""


def test_a_workflow_a_model_starts_never_prompts_the_person(tmp_path: Path) -> None:
    (tmp_path / "probe.sh").write_text(PROBE)
    (tmp_path / "inner.yaml").write_text(INNER)
    (tmp_path / "outer.yaml").write_text(OUTER)
    storage = tmp_path / "storage"
    child = spawn(tmp_path, storage, "run", "outer.yaml")
    try:
        # The inner run never waits for the person: the outer agent gets its turn back
        # and asks the person, in the person's terminal.
        child.expect_exact("outer done")
        child.expect_exact("> ")
        child.sendline("")
        child.expect_exact("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, transcript(child)

    [run] = Store(storage).history(limit=1)
    lines = (storage / "runs" / run.run_id / "transcript.jsonl").read_text().splitlines()
    [result] = [json.loads(x)["content"] for x in lines if json.loads(x).get("role") == "tool"]
    assert "inner exit 0" in result
    assert "terminal: no" in result  # no controlling terminal to open
    [inner] = Store(tmp_path / "inner-storage").history(limit=1)
    conversation = Store(tmp_path / "inner-storage").load_state(inner.run_id).steps["chat"]
    assert conversation.conversation.stopped_by == "user_exit"
    assert conversation.conversation.total_turns == 1  # ended at its first reply: no input


@pytest.fixture(autouse=True)
def _python_for_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWF_PYTHON", sys.executable)
