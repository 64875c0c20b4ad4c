"""Who answers a tool call's confirmation beyond the person at the prompt: an agent step in
a called workflow gets the run's tools and `--yes` but, being a sub-agent, never asks; a
cassette records the person's answers and replays them."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from awf_nb.runs import prepare_run
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


@pytest.mark.parametrize("yes", [False, True])
async def test_an_agent_in_a_called_workflow_has_its_tools_but_never_asks_the_person(
    workdir: Path, yes: bool
):
    (workdir / "child.yaml").write_text(CHILD_WITH_TOOLS)
    reader = Confirming([True])  # would allow, if it were asked
    runner = prepare_run(
        load_text(textwrap.dedent(PARENT), base_dir=workdir),
        cwd=workdir,
        reader=reader,
        yes=yes,
        storage=False,
    ).runner
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert reader.questions == []
    assert (workdir / "from-child.txt").exists() == yes


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
        runner = prepare_run(load_text(WRITER), cwd=workdir, storage=False, **kwargs).runner
        state = await asyncio.wait_for(runner.execute(), 60)
        assert state.status == "completed", state.error
        assert (workdir / "out.txt").read_text() == "hi", folder
    assert '{"type":"confirm","allowed":true}' in cassette.read_text().replace(" ", "")
