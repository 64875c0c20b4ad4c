"""Branch from here in real kernels (ipykernel 6.29 and 7.4): what panel_branch.js writes
when "Branch from here" is clicked on a message, the editor, the branch's panel below the
original and the two runs' diff — through the comm messages a browser sends."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.kernels import KernelSession, WidgetModel

pytestmark = pytest.mark.kernel

CELL_SECONDS = 60.0
STEP_SECONDS = 30.0

# The scripted provider with no replies says back the message it gets.
WORKFLOW = """
name: echo-chat
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Plan a balcony garden"
    on_success: done
  done: {type: terminal}
"""


def test_branch_from_the_first_message_with_an_edit(awf_kernel: KernelSession) -> None:
    cell = awf_kernel.submit("%%awf --out r\n" + textwrap.dedent(WORKFLOW).lstrip())
    awf_kernel.wait_for_text("awf-assistant", "Plan a balcony garden", STEP_SECONDS)
    awf_kernel.wait_for_input_box(STEP_SECONDS)

    (request,) = awf_kernel.find_widgets("TextModel", css_class="awf-branch-request")
    awf_kernel.set_value(request, json.dumps({"section": 0, "message": 0, "n": 1}))
    awf_kernel.pump_until(
        lambda: bool(
            awf_kernel.find_widgets("TextareaModel", css_class="awf-branch-text")
            and awf_kernel.find_widgets("ButtonModel", description="Run branch")
        ),
        STEP_SECONDS,
        "the branch editor",
    )
    (editor,) = awf_kernel.find_widgets("TextareaModel", css_class="awf-branch-text")
    assert editor.value == "Plan a balcony garden"
    awf_kernel.set_value(editor, "Plan a shady courtyard")
    awf_kernel.click(awf_kernel.button("Run branch"))

    awf_kernel.wait_for_text("awf-assistant", "Plan a shady courtyard", STEP_SECONDS)
    awf_kernel.wait_for_text("awf-branch-label", "from talk#1", STEP_SECONDS)
    awf_kernel.pump_until(
        lambda: len(awf_kernel.find_widgets(css_class="awf-controls")) == 2,
        STEP_SECONDS,
        "the branch's own text box",
    )
    original_box, branch_box = awf_kernel.find_widgets(css_class="awf-controls")
    _end_conversation(awf_kernel, branch_box)
    awf_kernel.wait_for_text("awf-diff", "they diverge at <b>talk#1</b>", STEP_SECONDS)
    _end_conversation(awf_kernel, original_box)
    outcome = awf_kernel.wait_for_cell(cell, CELL_SECONDS)
    assert outcome.status == "ok", outcome.reply["content"]
    check = awf_kernel.execute(
        "import asyncio, awf_nb\n"
        "await asyncio.wait({r.task})\n"
        "b = r.panel.brancher.branches[0].state\n"
        "print(b.forked_from['run'] == r.run_id, b.steps['talk'].conversation.turns[1].content)\n"
        "print(r.state.steps['talk'].conversation.turns[0].content)",
        timeout=CELL_SECONDS,
    )
    assert check.status == "ok", check.reply["content"]
    assert check.stdout.strip().splitlines()[-2:] == [
        "True Plan a shady courtyard",
        "Plan a balcony garden",
    ]


def _end_conversation(kernel: KernelSession, composer: WidgetModel) -> None:
    """What a click on End conversation in that panel's text box sends."""
    kernel.send_comm(composer.comm_id, {"method": "custom", "content": {"action": "end"}})
