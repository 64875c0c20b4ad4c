"""An agent step with tools inside a called workflow: the run's tools and `--yes` reach it,
and, being a sub-agent, it never asks the person to confirm a call."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from awf_nb.api import prepare_run
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
        load_text(textwrap.dedent(PARENT), base_dir=workdir), cwd=workdir, reader=reader, yes=yes
    )
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert reader.questions == []
    assert (workdir / "from-child.txt").exists() == yes
