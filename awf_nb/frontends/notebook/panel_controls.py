"""The conversation controls under a run panel: a text box with Send / End conversation, and
Stop (the reply being written) and Cancel run (the whole run), two distinct buttons.

Stop only ever stops the reply (or tool calls) in progress: the conversation goes on. Cancel
run cancels the run (its state is kept for `%awf resume`). While two agents talk
(`conversation.with`), the text box says that typing there steps in: Send stops the reply
being written and gives the person's message to the step's agent in the partner's place
(End conversation ends the exchange the same way). Send with an empty box ends the
conversation, as End conversation does (at a pause in an exchange it lets the partner go on).

All of it is one `Composer` widget (composer.py): each click or Enter arrives as one
message holding the action and the text. The message may come on another thread
(ipykernel 7 subshells), so it is handed to the run's loop, once, and acted on there
(`act`); the reader waiting for the message is answered at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from awf_nb.frontends.notebook.composer import ACTIONS, MAX_MESSAGE_CHARS, Composer

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.reader import WidgetReader

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

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The run's loop, once known."""

    def note(self, text: str) -> None:
        """Tell the person something, in a grey line."""

    def stop_reply(self) -> None:
        """Stop was clicked: stop the reply (or tool calls) being written."""

    def cancel_run(self) -> None:
        """Cancel run was clicked."""

    def step_in(self, message: str | None) -> None:
        """A message (None: end) typed while agents talk: it replaces the partner's next."""


class Controls:
    """The text box and buttons (one `Composer`). `reader` receives the person's messages."""

    def __init__(self, host: ControlsHost, *, interactive: bool) -> None:
        self.host = host
        self.interactive = interactive
        self.reader: WidgetReader | None = None
        self.awaiting = False  # the run waits for the person's message
        self.exchange: tuple[str, str] | None = None  # (agent, partner) while agents talk
        self.composer = Composer(
            interactive=interactive, placeholder=PROMPT_HINT, _dom_classes=("awf-controls",)
        )
        self.composer.on_msg(self._on_message)
        self.widget = self.composer

    @property
    def placeholder(self) -> str:
        return self.composer.placeholder

    def set_input_enabled(self, enabled: bool) -> None:
        """Let the person send (or end the conversation): while a message is awaited, and
        while agents talk (to step in)."""
        self.awaiting = enabled
        self._enable_sending(enabled or (self.exchange is not None and self.interactive))

    def _enable_sending(self, enabled: bool) -> None:
        self.composer.can_send = enabled

    def set_reply_running(self, running: bool) -> None:
        """A reply (or a tool call) is being written: Stop can stop it."""
        self.composer.can_stop = running

    def set_exchange(self, exchange: tuple[str, str] | None) -> None:
        """Agents talk (`(agent, partner)`), or no longer: the box says so, and Send steps in
        while they do. (The text being typed lives in the browser: a new placeholder
        leaves it alone.)"""
        self.exchange = exchange
        hint = PROMPT_HINT if exchange is None else exchange_hint(*exchange)
        if self.composer.placeholder != hint:
            self.composer.placeholder = hint
        self.set_input_enabled(self.awaiting)

    def run_ended(self) -> None:
        self.exchange = None
        with self.composer.hold_sync():  # one message for all three
            self.set_input_enabled(False)
            self.set_reply_running(False)
            self.composer.can_cancel = False

    # --- what the browser sends -----------------------------------------------------------

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from the browser (maybe on a comm thread): acted on on the run's loop."""
        if not isinstance(content, dict) or content.get("action") not in ACTIONS:
            return  # not one of ours: nothing to do
        action = str(content["action"])
        text = content.get("text")
        text = str(text)[:MAX_MESSAGE_CHARS] if text is not None else ""
        if _running_loop() is self.host.loop:  # on the run's loop already: at once
            self.act(action, text)
        else:
            self.host.on_loop(lambda: self.act(action, text))

    def act(self, action: str, text: str = "") -> None:
        """Do what the person asked (on the run's loop): send `text`, end, stop or cancel."""
        if action == "send":
            self._send(text)
        elif action == "end":
            self._end()
        elif action == "stop":
            self._stop_clicked()
        elif action == "cancel":
            self._cancel_clicked()

    def _may_send(self) -> bool:
        return (
            not self.host.finished
            and self.reader is not None
            and (self.awaiting or self.exchange is not None)
            and self.composer.can_send
        )

    def _send(self, message: str) -> None:
        if not self._may_send():
            # The run moved on while the message travelled: the text goes back to the box.
            if message.strip() and not self.host.finished:
                self.composer.restore(message)
            return
        # An empty Send ends the conversation (End conversation), except at a pause in an
        # exchange between agents, where it lets the partner go on.
        if not message.strip() and not (self.exchange is not None and self.awaiting):
            self._end()
            return
        self._enable_sending(False)  # also stops a double click from sending twice
        if self.awaiting:
            self.awaiting = False
            self.reader.submit(message)  # type: ignore[union-attr]  # checked by _may_send
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
        if not self.host.finished and self.composer.can_stop:
            self.host.stop_reply()

    def _cancel_clicked(self) -> None:
        if not self.host.finished and self.composer.can_cancel:
            self.composer.can_cancel = False
            self.host.cancel_run()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
