"""Branch from here in the run panel, without a browser: a click's request (what
panel_branch.js writes into the hidden widget), the editor, the branch's own panel below
the original, and the diff of the two runs."""

from __future__ import annotations

import asyncio
import json

import ipywidgets as widgets

from awf_nb.api import load
from awf_nb.frontends.notebook.frontend import start_branch
from awf_nb.frontends.notebook.handle import RunHandle
from awf_nb.frontends.notebook.panel import RunPanel
from awf_nb.frontends.notebook.panel_branch import diff_html
from awf_nb.frontends.notebook.reader import WidgetReader
from awf_nb.runs import prepare_run
from awf_nb.runs.diff import diff_runs
from tests.support.panel_frontend import PanelFrontend
from tests.support.panel_widgets import click, find, press, send, type_into
from tests.support.waiting import until

WAIT_SECONDS = 20.0

CHAT = """
name: chat
states:
  initial: prep
  prep: {type: step, command: "echo soil", on_success: talk}
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Plan with {{.states.prep.Output}}"
    options: {replies: ["How much sun?", "Then tomatoes.", "Then beans."]}
    on_success: done
  done: {type: terminal}
"""


def _start(store) -> tuple[RunPanel, RunHandle]:
    workflow = load(CHAT)
    panel = RunPanel(
        workflow.name, interactive=True, workflow=workflow, store=store, start_branch=start_branch
    )
    reader = WidgetReader()
    prepared = prepare_run(workflow, frontend=PanelFrontend(panel, reader), storage=store)
    handle = RunHandle(prepared, name="chat")
    handle.start()
    return panel, handle


def _request(panel: RunPanel, section: int, message: int | None) -> None:
    assert panel.brancher is not None
    type_into(panel.brancher.request, json.dumps({"section": section, "message": message}))


def _editor_box(panel: RunPanel) -> widgets.Textarea:
    assert panel.brancher is not None and panel.brancher.editor is not None
    (box,) = find(panel.brancher.editor, widgets.Textarea)
    return box


def _button(root: widgets.Widget, label: str) -> widgets.Button:
    return next(b for b in find(root, widgets.Button) if b.description == label)


async def test_branch_from_a_message_runs_the_edit_below_and_shows_the_diff(store) -> None:
    panel, handle = _start(store)
    await until(lambda: panel.input.composer.can_send, "the first prompt")
    send(panel.input, "Sunny, two square metres")
    await until(lambda: len(panel.sections()[1].bubbles) == 4, "the message and its reply")
    await until(lambda: panel.input.composer.can_send, "the second prompt")
    press(panel.input.composer, "end")
    original = await asyncio.wait_for(handle.wait(), WAIT_SECONDS)
    assert original.ok

    _request(panel, 1, 2)  # the person's message: talk#3
    await until(lambda: panel.brancher.editor is not None, "the editor")
    assert panel.brancher.area in panel.widget.children
    box = _editor_box(panel)
    assert box.value == "Sunny, two square metres"
    assert "Branch from talk#3" in find(panel.brancher.editor, widgets.HTML)[0].value
    type_into(box, "Shady, one square metre")
    click(_button(panel.brancher.editor, "Run branch"))

    await until(lambda: panel.brancher.branches, "the branch run")
    branch = panel.brancher.branches[0]
    assert branch.panel.widget in panel.brancher.area.children  # below the original
    await until(lambda: branch.panel.input.composer.can_send, "the branch's prompt")
    replies = [b for b in branch.panel.sections()[-1].bubbles if not isinstance(b, str)]
    assert replies and replies[-1].text == "Then tomatoes."
    press(branch.panel.input.composer, "end")
    result = await asyncio.wait_for(branch.wait(), WAIT_SECONDS)
    assert result.ok and result.state.forked_from == {
        "run": original.run_id,
        "step": "talk",
        "turn": 3,
    }
    await until(
        lambda: any("awf-diff" in c._dom_classes for c in panel.brancher.area.children), "diff"
    )
    diff = next(c for c in panel.brancher.area.children if "awf-diff" in c._dom_classes)
    assert "they diverge at <b>talk#3</b>" in diff.value
    assert "Shady, one square metre" in diff.value
    assert store.load_state(original.run_id).steps["talk"].conversation.turns[2].content == (
        "Sunny, two square metres"
    )


async def test_branch_from_a_step_edits_its_output(store) -> None:
    panel, handle = _start(store)
    await until(lambda: panel.input.composer.can_send, "the first prompt")
    press(panel.input.composer, "end")
    await asyncio.wait_for(handle.wait(), WAIT_SECONDS)

    _request(panel, 0, None)  # the command step `prep`
    await until(lambda: panel.brancher.editor is not None, "the editor")
    box = _editor_box(panel)
    assert box.value == "soil"
    type_into(box, "sand")
    click(_button(panel.brancher.editor, "Run branch"))
    await until(lambda: panel.brancher.branches, "the branch run")
    branch = panel.brancher.branches[0]
    await until(lambda: branch.panel.input.composer.can_send, "the branch's prompt")
    assert branch.panel.sections()[-1].bubbles[0] == "Plan with sand"
    press(branch.panel.input.composer, "end")
    assert (await asyncio.wait_for(branch.wait(), WAIT_SECONDS)).ok


async def test_a_request_that_names_nothing_is_ignored_and_cancel_closes(store) -> None:
    panel, handle = _start(store)
    await until(lambda: panel.input.composer.can_send, "the first prompt")
    _request(panel, 7, 0)
    type_into(panel.brancher.request, "not json")
    await asyncio.sleep(0)
    assert panel.brancher.editor is None
    _request(panel, 1, 0)
    await until(lambda: panel.brancher.editor is not None, "the editor")
    click(_button(panel.brancher.editor, "Cancel"))
    await until(lambda: panel.brancher.editor is None, "the editor closed")
    press(panel.input.composer, "end")
    await asyncio.wait_for(handle.wait(), WAIT_SECONDS)


def test_diff_html_marks_the_first_difference_and_escapes(store) -> None:
    from awf_nb.engine.state import RunState, StepState

    a = RunState(run_id="A", workflow_name="w", executed=["s"])
    a.steps["s"] = StepState(name="s", status="completed", output="<b>one</b>")
    b = RunState(run_id="B", workflow_name="w", executed=["s"])
    b.steps["s"] = StepState(name="s", status="completed", output="two")
    html = diff_html(diff_runs(a, b))
    assert "awf-diff-first" in html and "&lt;b&gt;one" in html and "<b>one" not in html
    assert "the same" in diff_html(diff_runs(a, a))
