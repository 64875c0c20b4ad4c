"""The panel's live diagram: off by default (nothing sent), and when on, redrawn as the
run moves, the running step highlighted and finished steps marked."""

from __future__ import annotations

import asyncio

from awf_nb.api import load
from awf_nb.frontends.notebook.diagram import MERMAID_MIME
from awf_nb.frontends.notebook.panel import RunPanel
from awf_nb.runs import prepare_run
from tests.support.waiting import until

WORKFLOW = """
name: three
states:
  initial: first
  first: {type: step, command: "echo one", on_success: second}
  second: {type: step, command: "sleep 30", on_success: done}
  done: {type: terminal}
"""


def mermaid(panel: RunPanel) -> str:
    (output,) = panel.diagram.outputs
    return output["data"][MERMAID_MIME]


async def test_the_diagram_is_off_by_default_and_sends_nothing() -> None:
    workflow = load(WORKFLOW.replace("sleep 30", "echo two"))
    panel = RunPanel(workflow.name, workflow=workflow)
    state = await prepare_run(workflow, sink=panel, storage=False).runner.execute()
    assert state.status == "completed"
    assert panel.diagram_toggle.value is False
    assert panel.diagram.outputs == ()
    assert panel.stats.diagram_updates == 0


async def test_the_running_step_is_highlighted_and_finished_ones_marked() -> None:
    workflow = load(WORKFLOW)
    panel = RunPanel(workflow.name, workflow=workflow)
    runner = prepare_run(workflow, sink=panel, storage=False).runner
    task = asyncio.create_task(runner.execute())
    try:
        await until(lambda: "second" in panel._sections, "the second step to start")
        panel.diagram_toggle.value = True  # a person clicks "Diagram"
        shown = mermaid(panel)
        assert "  class s_first completed" in shown
        assert "  class s_second current" in shown
    finally:
        runner.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert "class s_second failed" in mermaid(panel)  # cancelled: marked as not completed
    panel.diagram_toggle.value = False
    assert panel.diagram.outputs == ()
