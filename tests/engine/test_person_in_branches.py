"""A conversation with the person inside a parallel branch: `awf validate` refuses it
(tests/workflow/test_checks.py); a workflow that gets to run anyway — built in Python, or
called from a branch — fails that step with the reason instead of leaving two `> ` prompts
waiting for one keyboard. Agent-to-agent conversations in branches run."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from awf_nb.api import arun
from awf_nb.frontends.terminal import TerminalReader
from awf_nb.workflow.loader import load_text

# Valid as written: `left` runs after the parallel step. The tests move it into a branch.
TWO_CHATS = """
name: two-chats
states:
  initial: both
  both:
    type: parallel
    parallel: [right]
    on_success: left
  left:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello left
    options: {replies: ["left one", "left two"]}
    on_success: done
  right:
    type: agent
    provider: scripted
    mode: conversation
    prompt: hello right
    options: {replies: ["right one", "right two"]}
    conversation:
      with: {name: reviewer, replies: ["go on"]}
      max_turns: 2
  done: {type: terminal}
"""

REASON = (
    "a conversation with the person cannot run inside parallel step 'both': branches run "
    "at the same time and the person can answer only one conversation at once"
)


def piped_reader(*lines: str) -> TerminalReader:
    """The terminal reader, reading `lines` from a pipe as if typed."""
    read_end, write_end = os.pipe()
    os.write(write_end, "".join(f"{line}\n" for line in lines).encode())
    os.close(write_end)
    return TerminalReader(os.fdopen(read_end, encoding="utf-8"))


async def test_person_conversations_built_into_branches_fail_with_the_reason(
    tmp_path: Path,
) -> None:
    wf = load_text(TWO_CHATS)
    wf.steps["right"].conversation = None  # the person answers it too
    wf.steps["both"].parallel = ["left", "right"]  # what `awf validate` would refuse
    wf.steps["both"].on_success = "done"
    reader = piped_reader("more please", "")
    async with asyncio.timeout(30):  # hang guard: the two prompts used to wait forever
        result = await arun(wf, reader=reader, storage=False, cwd=tmp_path)
    assert result.status == "failed"
    assert REASON in result.error
    assert "conversation.with" in result.error


async def test_a_conversation_between_agents_runs_in_a_branch_beside_a_refused_one(
    tmp_path: Path,
) -> None:
    wf = load_text(TWO_CHATS)
    wf.steps["both"].parallel = ["left", "right"]
    wf.steps["both"].on_success = "done"
    wf.steps["both"].strategy = "best_effort"  # the refused branch does not stop the other
    async with asyncio.timeout(30):
        result = await arun(wf, reader=piped_reader("more", ""), storage=False, cwd=tmp_path)
    assert result.steps["left"].status == "failed"
    assert REASON in result.steps["left"].error
    right = result.steps["right"]
    assert right.status == "completed"
    assert [t.content for t in right.conversation.turns if t.role != "system"] == [
        "hello right", "right one", "go on", "right two"
    ]  # fmt: skip


async def test_a_called_workflow_chatting_with_the_person_from_a_branch_fails(
    tmp_path: Path,
) -> None:
    (tmp_path / "chat.yaml").write_text(
        "name: chat\nstates:\n  initial: talk\n  talk:\n    type: agent\n"
        "    provider: scripted\n    mode: conversation\n    prompt: hi\n"
        '    options: {replies: ["hello"]}\n    on_success: done\n  done: {type: terminal}\n'
    )
    caller = tmp_path / "caller.yaml"
    caller.write_text(
        "name: caller\nstates:\n  initial: both\n  both:\n    type: parallel\n"
        "    parallel: [call, other]\n    on_success: done\n"
        "  call: {type: call_workflow, workflow: chat}\n"
        "  other: {type: step, command: echo other}\n  done: {type: terminal}\n"
    )
    async with asyncio.timeout(30):
        result = await arun(
            caller, reader=piped_reader("hi there", ""), storage=False, cwd=tmp_path
        )
    assert result.status == "failed"
    assert "step talk: " + REASON in result.steps["call"].error


async def test_the_same_conversation_outside_the_branch_talks_with_the_person(
    tmp_path: Path,
) -> None:
    reader = piped_reader("more please", "")
    async with asyncio.timeout(30):
        result = await arun(load_text(TWO_CHATS), reader=reader, storage=False, cwd=tmp_path)
    assert result.ok, result.error
    turns = result.steps["left"].conversation.turns
    assert [t.content for t in turns if t.role == "user"] == ["hello left", "more please"]
    assert result.steps["right"].conversation.stopped_by == "max_turns"
