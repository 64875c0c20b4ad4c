"""The notebook's answer to a breakpoint (`%%awf --break-before STEP`, docs/debugging.md).

At each pause the run panel shows the step and what it is about to do (or did), the state
it reads, a text area holding the value (the step's resolved command or prompt before it,
its output after it), and the buttons Continue, Step, Edit, Skip and Abort. Edit and Skip
take the text area's value. The box gives way to a one-line note once answered.

Button callbacks may come from another thread (ipykernel 7's subshells): the answer is
handed to the run's loop, as the panel's other buttons do (`RunPanel.on_loop`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import ipywidgets as widgets

from awf_nb.engine.breakpoints import Pause, PauseAnswer
from awf_nb.frontends.notebook.summary import esc

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.panel import RunPanel

__all__ = ["BUTTONS", "PanelDebugger"]

# (label, action, CSS class): the buttons of a pause, in order.
BUTTONS = (
    ("Continue", "continue", "awf-pause-continue"),
    ("Step", "step", "awf-pause-step"),
    ("Edit", "edit", "awf-pause-edit"),
    ("Skip", "skip", "awf-pause-skip"),
    ("Abort", "abort", "awf-pause-abort"),
)
STATE_CHARS = 200  # of each earlier step's output, in the pause's list of state


class PanelDebugger:
    """Answers a run's pauses with buttons in its panel (see the module)."""

    def __init__(self, panel: RunPanel) -> None:
        self.panel = panel
        self.shown: widgets.VBox | None = None  # the pause box on screen, for tests

    async def pause(self, pause: Pause) -> PauseAnswer:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[PauseAnswer] = loop.create_future()
        value = widgets.Textarea(
            value=pause.value,
            layout=widgets.Layout(width="100%"),
            _dom_classes=("awf-pause-value",),
        )

        def answer(action: str) -> None:
            text = value.value if action in ("edit", "skip") else None
            if not answered.done():
                answered.set_result(PauseAnswer(action, text))  # type: ignore[arg-type]

        buttons = []
        for label, action, css in BUTTONS:
            button = widgets.Button(description=label, _dom_classes=("awf-pause-button", css))
            button.on_click(lambda _b, a=action: self.panel.on_loop(lambda: answer(a)))
            buttons.append(button)
        info = self.panel.html(_pause_html(pause), "awf-pause-info")
        row = widgets.HBox(buttons, _dom_classes=("awf-pause-buttons",))
        box = widgets.VBox([info, value, row], _dom_classes=("awf-pause",))
        notes = self.panel.notes
        notes.children = (*notes.children, box)
        self.shown = box
        try:
            result = await answered
        finally:
            notes.children = tuple(c for c in notes.children if c is not box)
            self.shown = None
            for widget in (box, row, info, value, *buttons):  # the kernel keeps none of them
                widget.close()
        self.panel.note(f"{pause.describe()}: {result.action}")
        return result


def _pause_html(pause: Pause) -> str:
    what = {"command": "command", "agent": "prompt"}.get(pause.step_type, "runs")
    if pause.when == "after":
        what = "output"
    rows = "".join(
        f"<li><code>{esc(name)}</code>: {esc(output[:STATE_CHARS])}</li>"
        for name, output in pause.state.items()
    )
    state = f"<div>state:<ul>{rows}</ul></div>" if rows else ""
    return (
        f"<b>⏸ {esc(pause.describe())}</b>"
        f"<div>{what}:</div><pre class='awf-pause-shows'>{esc(pause.shows)}</pre>{state}"
    )
