"""`%%awf --break-before STEP` in real kernels (ipykernel 6.29 and 7.4): the pause is shown
in the run panel with its buttons, Edit takes the text area's value (sent with the click,
in one message), and Skip gives a step
its output without running it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.kernels import KernelSession

pytestmark = pytest.mark.kernel

CELL_SECONDS = 60.0
STEP_SECONDS = 30.0

WORKFLOW = """
name: debug-me
states:
  initial: make
  make: {type: command, command: "echo made", on_success: show}
  show: {type: command, command: "touch shown.txt; echo shown", on_success: done}
  done: {type: terminal, message: "all done"}
"""


def _pause(kernel: KernelSession, needle: str) -> None:
    kernel.wait_for_text("awf-pause-info", needle, STEP_SECONDS)


def _result(kernel: KernelSession, handle: str) -> list[str]:
    outcome = kernel.execute(
        f"_r = await {handle}\n"
        "print(_r.status); print(_r.outputs['make']); print(_r.outputs['show'])",
        timeout=CELL_SECONDS,
    )
    assert outcome.status == "ok", outcome.reply["content"]
    return outcome.stdout.strip().splitlines()[-3:]


def test_edit_then_skip_with_the_panel_buttons(awf_kernel: KernelSession, tmp_path: Path) -> None:
    cell = (
        "%%awf --out r --break-after make --break-before show\n"
        + textwrap.dedent(WORKFLOW).lstrip()
    )
    awf_kernel.submit(cell)
    _pause(awf_kernel, "paused after step make (command)")
    box = awf_kernel.find_widgets(css_class="awf-pause-do")
    assert [w.value for w in box] == ["made"]  # what the text area shows
    assert [label for label, _, _ in box[0].state["actions"]] == [
        "Continue",
        "Step",
        "Edit",
        "Skip",
        "Abort",
    ]
    awf_kernel.answer_pause("edit", "edited in the panel")
    _pause(awf_kernel, "edited in the panel")  # shown again with the new value
    awf_kernel.answer_pause("continue")
    _pause(awf_kernel, "paused before step show (command)")
    _pause(awf_kernel, "touch shown.txt; echo shown")
    awf_kernel.answer_pause("skip", "mocked")
    assert _result(awf_kernel, "r") == ["completed", "edited in the panel", "mocked"]
    assert not (tmp_path / "shown.txt").exists()
    assert any(
        "paused before step show (command): skip" in text
        for text in awf_kernel.texts("awf-note-line")
    )


def test_abort_cancels_the_run(awf_kernel: KernelSession) -> None:
    cell = "%%awf --out r --break-before show\n" + textwrap.dedent(WORKFLOW).lstrip()
    submitted = awf_kernel.submit(cell)
    _pause(awf_kernel, "paused before step show (command)")
    awf_kernel.answer_pause("abort")
    # ipykernel 7.4 awaits the run in the cell, which then says it was cancelled; 6.29 ran
    # it in the background, and the cell had returned already.
    awf_kernel.wait_for_cell(submitted, CELL_SECONDS)
    check = awf_kernel.execute(
        "import asyncio\nawait asyncio.wait({r.task})\nprint(r.state.status, r.state.paused)",
        timeout=CELL_SECONDS,
    )
    assert check.status == "ok", check.reply["content"]
    assert check.stdout.strip().splitlines()[-1] == "cancelled {'show': 'before'}"
