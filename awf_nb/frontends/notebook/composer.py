"""`Composer`: the run panel's text box and its buttons, as one small anywidget.

What the person types stays in the browser until they send it; then the text and what to
do with it travel together, in one custom message on the widget's comm:
`{"action": "send", "text": …}`, or `"end"`, `"stop"`, `"cancel"`. The kernel hands the
message to the run's loop once (`Controls.act`), and the reader waiting for a message is
answered there: no timer, no polling, no text box synced separately from the click.

(The ipywidgets text box this replaces synced its value apart from the Send click, so the
kernel had to wait a moment after each click for the text, and a synced box had to be
replaced by a new widget, since ipywidgets sends a model's next update only after the
kernel reports idle for the previous one, which an awaiting cell never does. Custom
messages are not held back that way.)

Kernel to browser, all traits: the placeholder, whether Send / End conversation, Stop and
Cancel run may be used, and whether there is a text box at all (`interactive`). A message
the kernel could not take (the run moved on while it travelled) comes back as
`{"restore": text}`, so nothing typed is lost. The JavaScript is composer.js, its layout
composer.css (shipped in the package, nothing fetched); Enter sends, Shift+Enter adds a
line, as in a chat box.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["ACTIONS", "Composer"]

ACTIONS = ("send", "end", "stop", "cancel")  # what a message from the browser may ask
MAX_MESSAGE_CHARS = 1_000_000  # a longer message is cut to this (the browser has no limit)


class Composer(anywidget.AnyWidget):
    """The text box with Send / End conversation, Stop and Cancel run."""

    _esm = Path(__file__).with_name("composer.js")
    _css = Path(__file__).with_name("composer.css")
    interactive = traitlets.Bool(True).tag(sync=True)  # a text box with Send / End
    placeholder = traitlets.Unicode("").tag(sync=True)
    can_send = traitlets.Bool(False).tag(sync=True)  # Send and End conversation
    can_stop = traitlets.Bool(False).tag(sync=True)
    can_cancel = traitlets.Bool(True).tag(sync=True)

    def restore(self, text: str) -> None:
        """Give `text` back to the text box (a message the run could not take)."""
        self.send({"restore": text})
