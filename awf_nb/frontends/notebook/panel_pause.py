"""The notebook's answer to a breakpoint (`%%awf --break-before STEP`, docs/debugging.md).

At each pause the run panel shows the step and what it is about to do (or did), the state
it reads, a text area holding the value (the step's resolved command or prompt before it,
its output after it), and the buttons Continue, Step, Edit, Skip and Abort. Edit and Skip
take the text area's value. The box gives way to a one-line note once answered.

The text area and the buttons are one small widget (`PauseControls`, pause_view.js): the
text stays in the browser until a button is clicked, then the action and the text reach the
kernel in one message. (A text box synced on its own would reach an awaiting cell once
only: ipywidgets holds a model's next update until the kernel reports idle for the last.)
The message may come on another thread (ipykernel 7's subshells): the answer is handed to
the run's loop, as the panel's other controls do (`RunPanel.on_loop`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets
import traitlets

from awf_nb.engine.breakpoints import Pause, PauseAnswer
from awf_nb.frontends.notebook.summary import esc

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.panel import RunPanel

__all__ = ["BUTTONS", "PanelDebugger", "PauseControls"]

# (label, action, CSS class): the buttons of a pause, in order.
BUTTONS = (
    ("Continue", "continue", "awf-pause-continue"),
    ("Step", "step", "awf-pause-step"),
    ("Edit", "edit", "awf-pause-edit"),
    ("Skip", "skip", "awf-pause-skip"),
    ("Abort", "abort", "awf-pause-abort"),
)
STATE_CHARS = 200  # of each earlier step's output, in the pause's list of state
MAX_VALUE_CHARS = 1_000_000  # of an edited value (the browser's text area has no limit)


class PauseControls(anywidget.AnyWidget):
    """A pause's text area (holding `value`) and its buttons (`actions`: label, action,
    CSS class); a click sends `{"action", "text"}`."""

    _esm = Path(__file__).with_name("pause_view.js")
    _css = Path(__file__).with_name("composer.css")  # the composer's layout, shared
    value = traitlets.Unicode("").tag(sync=True)
    actions: traitlets.List[list[str]] = traitlets.List().tag(sync=True)


class PanelDebugger:
    """Answers a run's pauses with buttons in its panel (see the module)."""

    def __init__(self, panel: RunPanel) -> None:
        self.panel = panel
        self.shown: widgets.VBox | None = None  # the pause box on screen, for tests

    async def pause(self, pause: Pause) -> PauseAnswer:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[PauseAnswer] = loop.create_future()
        actions = {action for _label, action, _css in BUTTONS}

        def answer(action: str, text: str) -> None:
            if action in actions and not answered.done():
                value = text[:MAX_VALUE_CHARS] if action in ("edit", "skip") else None
                answered.set_result(PauseAnswer(action, value))  # type: ignore[arg-type]

        def on_message(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict):
                action, text = str(content.get("action")), str(content.get("text") or "")
                self.panel.on_loop(lambda: answer(action, text))

        controls = PauseControls(
            value=pause.value, actions=[list(b) for b in BUTTONS], _dom_classes=("awf-pause-do",)
        )
        controls.on_msg(on_message)
        info = self.panel.html(_pause_html(pause), "awf-pause-info")
        box = widgets.VBox([info, controls], _dom_classes=("awf-pause",))
        notes = self.panel.notes
        notes.children = (*notes.children, box)
        self.shown = box
        try:
            result = await answered
        finally:
            notes.children = tuple(c for c in notes.children if c is not box)
            self.shown = None
            for widget in (box, info, controls):  # the kernel keeps none of them
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
