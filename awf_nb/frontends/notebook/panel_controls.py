"""The conversation controls under a run panel: a text box with Send / End conversation,
and Stop.

Widget callbacks can arrive on another thread (ipykernel 7 subshells), so every button
handler only hands its work to the run's loop (`ControlsHost.on_loop`); the widgets are
changed on that loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import ipywidgets as widgets

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.reader import WidgetReader

SEND_SETTLE = 0.1  # seconds from a Send click to reading the text box (see `_send`)
SEND_PATIENCE = 1.0  # how long an empty box is looked at again before saying it is empty


class ControlsHost(Protocol):
    """What the controls need from their panel."""

    finished: bool

    def on_loop(self, action: Callable[[], None]) -> None:
        """Run `action` on the run's loop (from any thread)."""

    def later(self, delay: float, action: Callable[[], None]) -> None:
        """Run `action` on the run's loop after `delay` seconds."""

    def note(self, text: str) -> None:
        """Tell the person something, in a grey line."""

    def stopping(self) -> None:
        """Stop was clicked and the run is being cancelled."""


class Controls:
    """The text box and buttons. `reader` receives messages; `stop` is `Runner.interrupt`."""

    def __init__(self, host: ControlsHost, *, interactive: bool) -> None:
        self.host = host
        self.interactive = interactive
        self.reader: WidgetReader | None = None
        self.stop: Callable[[], str] | None = None
        self.awaiting = False
        self._text_layout = widgets.Layout(width="100%")
        self.text = self._new_text_box()
        self.send_button = widgets.Button(
            description="Send", button_style="primary", _dom_classes=("awf-send",)
        )
        self.end_button = widgets.Button(description="End conversation", _dom_classes=("awf-end",))
        self.stop_button = widgets.Button(
            description="Stop", button_style="warning", _dom_classes=("awf-stop",)
        )
        self.send_button.on_click(lambda _: host.on_loop(self._send))
        self.end_button.on_click(lambda _: host.on_loop(self._end))
        self.stop_button.on_click(lambda _: host.on_loop(self._stop_clicked))
        self.set_input_enabled(False)
        if interactive:
            buttons = widgets.HBox([self.send_button, self.end_button, self.stop_button])
        else:
            buttons = widgets.HBox([self.stop_button])
        # The text box lives in a box of its own, so replacing it (see `_renew_text_box`)
        # changes only that box's children: replacing a child of `widget` would make the
        # browser rebuild the button row after it, losing a click in progress.
        self.text_holder = widgets.Box([self.text], layout=widgets.Layout(width="100%"))
        self.widget = widgets.VBox(
            [self.text_holder, buttons] if interactive else [buttons],
            _dom_classes=("awf-controls",),
        )

    def set_input_enabled(self, enabled: bool) -> None:
        """Let the person send (or end the conversation) — only while a message is awaited."""
        self.awaiting = enabled
        self.send_button.disabled = not enabled
        self.end_button.disabled = not enabled

    # --- the text box ---------------------------------------------------------------------------

    def _new_text_box(self, value: str = "") -> widgets.Textarea:
        box = widgets.Textarea(
            value=value,
            placeholder="Your message (Enter sends, Shift+Enter adds a line)",
            continuous_update=False,  # one sync when the box loses focus (or Enter), not per key
            rows=2,
            layout=self._text_layout,
            _dom_classes=("awf-input",),
        )
        box.observe(self._on_text_synced, names="value")
        return box

    def _on_text_synced(self, change: dict[str, Any]) -> None:
        box = change["owner"]
        self.host.on_loop(lambda: self._renew_text_box(box))

    def _renew_text_box(self, box: widgets.Textarea, value: str | None = None) -> None:
        """Put a fresh text box (holding `value`, default the old box's text) in its place.

        In the browser, ipywidgets sends a widget's next change only once the kernel has
        reported idle for its previous one; ipykernel >= 7.4 handles the comm messages of an
        awaiting cell without reporting busy/idle, so a text box would reach the kernel once
        and never again while the cell runs. A box that has synced is therefore replaced by
        a new one (a new widget model), and every box syncs at most once.
        """
        if box is not self.text or self.host.finished:
            return
        fresh = self._new_text_box(box.value if value is None else value)
        self.text = fresh
        self.text_holder.children = (fresh,)
        box.unobserve(self._on_text_synced, names="value")
        box.close()

    # --- the buttons (on the run's loop) -------------------------------------------------------

    def _send(self) -> None:
        """Send the text box's message, read a moment after the click: ipykernel 7 may
        handle the box's update and the click on different threads, so the text can arrive
        just after the click."""
        if self.host.finished or self.reader is None or not self.awaiting:
            return  # a click on a disabled button (what a browser would not even send)
        self.set_input_enabled(False)  # also stops a double click from sending twice
        deadline = time.monotonic() + SEND_PATIENCE
        self.host.later(SEND_SETTLE, lambda: self._send_text(deadline))

    def _send_text(self, deadline: float) -> None:
        if self.host.finished or self.reader is None:
            return
        message = self.text.value
        if not message.strip():
            if time.monotonic() < deadline:
                self.host.later(SEND_SETTLE, lambda: self._send_text(deadline))
                return
            self.set_input_enabled(True)
            self.host.note("Type a message first, or click End conversation to finish.")
            return
        self._renew_text_box(self.text, "")
        self.reader.submit(message)

    def _end(self) -> None:
        if self.host.finished or self.reader is None or not self.awaiting:
            return
        self.set_input_enabled(False)
        self.reader.end()

    def _stop_clicked(self) -> None:
        if self.host.finished or self.stop is None:
            return
        if self.stop() == "run":
            self.set_input_enabled(False)
            self.host.stopping()
