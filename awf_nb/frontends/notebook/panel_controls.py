"""The conversation controls under a run panel: a text box with Send / End conversation, and
Stop (the reply being written) and Cancel run (the whole run), two distinct buttons.

Stop only ever stops the reply (or tool calls) in progress: the conversation goes on. Cancel
run cancels the run (its state is kept for `%awf resume`). While two agents talk
(`conversation.with`), the text box says that typing there steps in: Send stops the reply
being written and gives the person's message to the step's agent in the partner's place
(End conversation ends the exchange the same way).

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
PROMPT_HINT = "Your message (Enter sends, Shift+Enter adds a line)"


def exchange_hint(agent: str, partner: str) -> str:
    """What the text box says while `agent` and `partner` talk."""
    return (
        f"{agent} and {partner} are talking. Type here and Send to step in: your message "
        f"goes to {agent} in {partner}'s place (sent empty at a pause: {partner} goes on)"
    )


class ControlsHost(Protocol):
    """What the controls need from their panel."""

    finished: bool

    def on_loop(self, action: Callable[[], None]) -> None:
        """Run `action` on the run's loop (from any thread)."""

    def later(self, delay: float, action: Callable[[], None]) -> None:
        """Run `action` on the run's loop after `delay` seconds."""

    def note(self, text: str) -> None:
        """Tell the person something, in a grey line."""

    def stop_reply(self) -> None:
        """Stop was clicked: stop the reply (or tool calls) being written."""

    def cancel_run(self) -> None:
        """Cancel run was clicked."""

    def step_in(self, message: str | None) -> None:
        """A message (None: end) typed while agents talk: it replaces the partner's next."""


class Controls:
    """The text box and buttons. `reader` receives the person's messages."""

    def __init__(self, host: ControlsHost, *, interactive: bool) -> None:
        self.host = host
        self.interactive = interactive
        self.reader: WidgetReader | None = None
        self.awaiting = False  # the run waits for the person's message
        self.exchange: tuple[str, str] | None = None  # (agent, partner) while agents talk
        self.placeholder = PROMPT_HINT
        self._text_layout = widgets.Layout(width="100%")
        self.text = self._new_text_box()
        self.send_button = widgets.Button(
            description="Send", button_style="primary", _dom_classes=("awf-send",)
        )
        self.end_button = widgets.Button(
            description="End conversation",
            tooltip="End the conversation: the step succeeds with the last reply",
            _dom_classes=("awf-end",),
        )
        self.stop_button = widgets.Button(
            description="Stop",
            button_style="warning",
            tooltip="Stop the reply being written (the conversation goes on)",
            disabled=True,
            _dom_classes=("awf-stop",),
        )
        self.cancel_button = widgets.Button(
            description="Cancel run",
            button_style="danger",
            tooltip="Cancel the whole run (%awf resume continues it)",
            _dom_classes=("awf-cancel",),
        )
        self.send_button.on_click(lambda _: host.on_loop(self._send))
        self.end_button.on_click(lambda _: host.on_loop(self._end))
        self.stop_button.on_click(lambda _: host.on_loop(self._stop_clicked))
        self.cancel_button.on_click(lambda _: host.on_loop(self._cancel_clicked))
        self.set_input_enabled(False)
        run_buttons = [self.stop_button, self.cancel_button]
        if interactive:
            buttons = widgets.HBox([self.send_button, self.end_button, *run_buttons])
        else:
            buttons = widgets.HBox(run_buttons)
        # The text box lives in a box of its own, so replacing it (see `_renew_text_box`)
        # changes only that box's children: replacing a child of `widget` would make the
        # browser rebuild the button row after it, losing a click in progress.
        self.text_holder = widgets.Box([self.text], layout=widgets.Layout(width="100%"))
        self.widget = widgets.VBox(
            [self.text_holder, buttons] if interactive else [buttons],
            _dom_classes=("awf-controls",),
        )

    def set_input_enabled(self, enabled: bool) -> None:
        """Let the person send (or end the conversation): while a message is awaited, and
        while agents talk (to step in)."""
        self.awaiting = enabled
        self._enable_sending(enabled or (self.exchange is not None and self.interactive))

    def _enable_sending(self, enabled: bool) -> None:
        self.send_button.disabled = not enabled
        self.end_button.disabled = not enabled

    def set_reply_running(self, running: bool) -> None:
        """A reply (or a tool call) is being written: Stop can stop it."""
        self.stop_button.disabled = not running

    def set_exchange(self, exchange: tuple[str, str] | None) -> None:
        """Agents talk (`(agent, partner)`), or no longer: the box says so, and Send steps in
        while they do.

        The box's text is only changed when the exchange starts and ends: any change to the
        text box's widget resets what the browser shows in it to the kernel's value, which
        would wipe what the person is typing."""
        self.exchange = exchange
        self._set_placeholder(PROMPT_HINT if exchange is None else exchange_hint(*exchange))
        self.set_input_enabled(self.awaiting)

    def run_ended(self) -> None:
        self.exchange = None
        self.set_input_enabled(False)
        self.set_reply_running(False)
        self.cancel_button.disabled = True

    # --- the text box ---------------------------------------------------------------------------

    def _set_placeholder(self, text: str) -> None:
        self.placeholder = text
        if self.text.placeholder != text:
            self.text.placeholder = text

    def _new_text_box(self, value: str = "") -> widgets.Textarea:
        box = widgets.Textarea(
            value=value,
            placeholder=self.placeholder,
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

    def _may_send(self) -> bool:
        return (
            not self.host.finished
            and self.reader is not None
            and (self.awaiting or self.exchange is not None)
            and not self.send_button.disabled
        )

    def _send(self) -> None:
        """Send the text box's message, read a moment after the click: ipykernel 7 may
        handle the box's update and the click on different threads, so the text can arrive
        just after the click."""
        if not self._may_send():
            return  # a click on a disabled button (what a browser would not even send)
        self._enable_sending(False)  # also stops a double click from sending twice
        deadline = time.monotonic() + SEND_PATIENCE
        self.host.later(SEND_SETTLE, lambda: self._send_text(deadline))

    def _send_text(self, deadline: float) -> None:
        if self.host.finished or self.reader is None:
            return
        message = self.text.value
        if not message.strip():
            if time.monotonic() < deadline:  # the text may still be on its way
                self.host.later(SEND_SETTLE, lambda: self._send_text(deadline))
                return
            # In an exchange between agents an empty message at a pause lets the partner go
            # on; anywhere else it says nothing.
            if not (self.exchange is not None and self.awaiting):
                self._enable_sending(True)
                self.host.note("Type a message first, or click End conversation to finish.")
                return
        self._renew_text_box(self.text, "")
        if self.awaiting:
            self.awaiting = False
            self.reader.submit(message)
        else:
            self.host.step_in(message)

    def _end(self) -> None:
        if not self._may_send():
            return
        self._enable_sending(False)
        if self.awaiting:
            self.awaiting = False
            self.reader.end()  # type: ignore[union-attr]  # checked by _may_send
        else:
            self.host.step_in(None)

    def _stop_clicked(self) -> None:
        if not self.host.finished and not self.stop_button.disabled:
            self.host.stop_reply()

    def _cancel_clicked(self) -> None:
        if not self.host.finished and not self.cancel_button.disabled:
            self.cancel_button.disabled = True
            self.host.cancel_run()
