"""Who answers a tool call's confirmation beyond the person at the prompt: an agent step in
a workflow run by a `call_workflow` step asks the person as any step does (and gets the
run's `--yes`); a cassette records the person's answers and replays them."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from awf_nb.api import prepare_run
from awf_nb.frontends.scripted import ScriptedReader
from awf_nb.workflow.loader import load_text
from tests.engine.test_tool_loop import Confirming

CHILD_WITH_TOOLS = """
name: child
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Write it.
    tools: {builtin: [Write], confirm: [Write]}
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {path: from-child.txt, content: hi}}]
        - "Tried."
    on_success: done
  done: {type: terminal, message: "{{.states.work.Output}}"}
"""

PARENT = """
name: parent
states:
  initial: call
  call: {type: call_workflow, workflow: child, on_success: done}
  done: {type: terminal}
"""


@pytest.mark.parametrize("allowed", [True, False])
async def test_an_agent_in_a_called_workflow_asks_the_person(workdir: Path, allowed: bool):
    (workdir / "child.yaml").write_text(CHILD_WITH_TOOLS)
    reader = Confirming([allowed])
    runner = prepare_run(
        load_text(textwrap.dedent(PARENT), base_dir=workdir), cwd=workdir, reader=reader
    )
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert reader.questions == ['Allow Write({"path": "from-child.txt", "content": "hi"})?']
    assert (workdir / "from-child.txt").exists() == allowed


@pytest.mark.parametrize(("yes", "written"), [(True, True), (False, False)])
async def test_a_called_workflow_with_nobody_to_ask_follows_the_runs_yes(
    workdir: Path, yes: bool, written: bool
):
    (workdir / "child.yaml").write_text(CHILD_WITH_TOOLS)
    runner = prepare_run(load_text(textwrap.dedent(PARENT), base_dir=workdir), cwd=workdir, yes=yes)
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert (workdir / "from-child.txt").exists() == written


async def test_a_conversation_in_a_called_workflow_talks_with_the_person(workdir: Path):
    (workdir / "chat.yaml").write_text(
        "name: chat\nstates:\n  initial: talk\n  talk:\n    type: agent\n"
        "    provider: scripted\n    mode: conversation\n    prompt: hi\n"
        '    options: {replies: ["hello", "tea it is"]}\n    on_success: done\n'
        '  done: {type: terminal, message: "{{.states.talk.Output}}"}\n'
    )
    parent = PARENT.replace("workflow: child", "workflow: chat")
    reader = ScriptedReader(["tea, please", ""])
    runner = prepare_run(
        load_text(textwrap.dedent(parent), base_dir=workdir), cwd=workdir, reader=reader
    )
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert state.steps["call"].output == "tea it is"
    assert reader.remaining == 0  # both lines were read by the called conversation
    assert reader.prompts == ["> ", "> "]


WRITER = """
name: writer
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Write it.
    tools: {builtin: [Write], confirm: [Write]}
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {path: out.txt, content: hi}}]
        - "Written."
    on_success: done
  done: {type: terminal}
"""


async def test_confirmations_are_recorded_in_a_cassette_and_replayed(tmp_path: Path):
    """The person's answer to a confirmation is part of the recording: the replay needs
    nobody to ask, and allows the call again."""
    cassette = tmp_path / "run.cassette.jsonl"
    for folder, kwargs in (
        ("recorded", {"record": cassette, "reader": Confirming([True])}),
        ("replayed", {"replay": cassette}),
    ):
        workdir = tmp_path / folder
        workdir.mkdir()
        runner = prepare_run(load_text(WRITER), cwd=workdir, **kwargs)
        state = await asyncio.wait_for(runner.execute(), 60)
        assert state.status == "completed", state.error
        assert (workdir / "out.txt").read_text() == "hi", folder
    assert '{"type":"confirm","allowed":true}' in cassette.read_text().replace(" ", "")
