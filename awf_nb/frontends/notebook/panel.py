"""The live run panel: one ipywidgets panel per run, fed by the run's events.

Layout (top to bottom): the status line (workflow, state, running step, elapsed time,
tokens); one collapsible section per executed step (command output, agent replies rendered
as Markdown, chat bubbles, tool uses, tool-call blocks with Allow / Deny when a call needs
the person's approval, warnings, errors in red); the conversation controls (a text box
with Send / End conversation, and Stop); the summary when the run ends.

Streaming without flooding the kernel: `emit` only buffers text; a flush at most every
`FLUSH_INTERVAL` seconds (10 Hz) sends each changed widget once (panel_flush.py), and only
what changed: replies and command output are `StreamHTML` widgets (stream_view.py) that
receive finished blocks once and the open one as a diff. The status line's clock only ticks
when nothing else is being sent. Widgets are changed on the run's loop only. When the run
ends, the cell's output also gets a static HTML copy of the panel (panel_static.py), for
readers of the saved notebook.

The pieces: panel_items.py (sections, replies, output), panel_controls.py (the text box
and buttons), panel_tools.py (tool-call blocks), panel_flush.py (when changes are sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from ipywidgets.widgets.widget_string import HTMLStyle

from awf_nb.engine import events as ev
from awf_nb.engine.summary import RunSummary, format_elapsed, format_tokens
from awf_nb.frontends.notebook.panel_controls import Controls
from awf_nb.frontends.notebook.panel_flush import Flusher
from awf_nb.frontends.notebook.panel_items import (
    ENTER_TO_SEND_JS,
    PANEL_CSS,
    Output,
    PanelBox,
    PanelStats,
    Section,
    error_html,
)
from awf_nb.frontends.notebook.panel_tools import ToolBlock
from awf_nb.frontends.notebook.summary import STATUS_COLORS, esc, summary_html

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.workflow.model import Workflow

FLUSH_INTERVAL = 0.1  # seconds between flushes of streamed text: 10 Hz
STATUS_INTERVAL = 1.0  # the status line's clock
TOOL_ARGUMENT_CHARS = 200


class RunPanel:
    """An `EventSink` that draws a run as widgets. `widget` is what to display."""

    def __init__(
        self,
        title: str,
        *,
        interactive: bool = False,
        flush_interval: float = FLUSH_INTERVAL,
        status_interval: float = STATUS_INTERVAL,
        workflow: Workflow | None = None,
    ) -> None:
        self.title = title
        # With the workflow, a "Diagram" toggle shows it live: the running step highlighted,
        # finished steps marked. Off by default; redrawn only while shown.
        self.workflow = workflow
        self._step_status: dict[str, str] = {}
        self._current_step = ""
        self.interactive = interactive
        self.status_interval = status_interval
        self.stats = PanelStats()
        self.run_id = ""
        self.finished = False
        self.summary: RunSummary | None = None
        self.display_handle: Any = None  # IPython's DisplayHandle once displayed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sections: dict[str, Section] = {}
        self._order: list[Section] = []
        # Tool calls by (step, call id): each keeps its block until the call ends.
        self._tools: dict[tuple[str, str], ToolBlock] = {}
        self._confirming: tuple[str, str] | None = None  # the call whose buttons are shown
        self.flusher = Flusher(flush_interval, self.stats, lambda: self._loop)
        self._tick_handle: asyncio.TimerHandle | None = None
        self._started = time.monotonic()
        self._tokens = 0
        self._tokens_estimated = False
        self._activity = "starting"
        self._status_sent = ""
        self._build()

    # --- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.shared_layout = widgets.Layout()
        self.html_style = HTMLStyle()
        css = widgets.HTML(PANEL_CSS, layout=widgets.Layout(display="none"))
        self.status = self.html("", "awf-status")
        self.notes = widgets.VBox(layout=self.shared_layout, _dom_classes=("awf-notes",))
        self.steps = widgets.VBox(layout=self.shared_layout, _dom_classes=("awf-steps",))
        self.input = Controls(self, interactive=self.interactive)
        top: list[widgets.Widget] = [css, self.status]
        if self.workflow is not None:
            self.diagram_toggle = widgets.ToggleButton(
                description="Diagram", value=False, _dom_classes=("awf-diagram-toggle",)
            )
            self.diagram = widgets.Output(_dom_classes=("awf-diagram",))
            self.diagram_toggle.observe(lambda _: self._refresh_diagram(), names="value")
            top += [self.diagram_toggle, self.diagram]
        self.widget = PanelBox(
            self.title,
            children=[*top, self.notes, self.steps, self.input.widget],
            _dom_classes=("awf-panel",),
        )
        self._update_status()

    def attach(
        self,
        *,
        reader: WidgetReader | None = None,
        stop: Callable[[], str] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Connect the buttons: Send/End to `reader`, Stop to `stop` (`Runner.interrupt`)."""
        self.input.reader = reader
        self.input.stop = stop
        if loop is not None:
            self._loop = loop

    def html(self, value: str, *css_classes: str) -> widgets.HTML:
        """An HTML item; classes given at creation (`add_class` later costs a message)."""
        return widgets.HTML(
            value, layout=self.shared_layout, style=self.html_style, _dom_classes=css_classes
        )

    # --- what the controls ask of the panel (`panel_controls.ControlsHost`) ----------------

    def on_loop(self, action: Callable[[], None]) -> None:
        """Run `action` on the run's loop: widget callbacks may come from another thread."""
        loop = self._loop
        if loop is None:
            action()
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is long over
            loop.call_soon_threadsafe(action)

    def later(self, delay: float, action: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            action()
        else:
            loop.call_later(delay, action)

    def stopping(self) -> None:
        self._activity = "cancelling"
        self._update_status()

    # --- public helpers for the magic -------------------------------------------------------

    def note(self, text: str) -> None:
        """A grey line under the status line (e.g. how to get the result of a background run)."""
        item = self.html(f'<span class="awf-note">{esc(text)}</span>', "awf-note-line")
        self.notes.children = (*self.notes.children, item)

    def show_error(self, message: str) -> None:
        """An error in red, one paragraph, outside any step (e.g. an internal error)."""
        item = self.html(error_html(message), "awf-error")
        self.notes.children = (*self.notes.children, item)

    def close_controls(self) -> None:
        self.input.set_input_enabled(False)
        self.widget.children = tuple(c for c in self.widget.children if c is not self.input.widget)

    def abort(self, message: str) -> None:
        """The run ended without a RunFinished event (it could not start, or a bug): say so."""
        if self.finished:
            return
        self.flush()
        self.finished = True
        self._cancel_timers()
        self._activity = "failed"
        self.show_error(message)
        self.close_controls()
        self._update_status()
        self._save_static()

    # --- events -----------------------------------------------------------------------------

    def emit(self, event: ev.RunEvent) -> None:
        if type(event) is ev.AgentText:  # the hot path: once per streamed token
            section = self._sections.get(event.step)
            if section is None:
                return
            reply = section.reply if section.reply is not None else section.new_reply(event.speaker)
            reply.parts.append(event.text)
            self.flusher.mark(reply)
            return
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _on_run_started(self, event: ev.RunStarted) -> None:
        self._capture_loop()
        self.run_id = event.run_id
        self._started = time.monotonic()
        self._activity = "resuming" if event.resumed else "running"
        self._update_status()
        self._schedule_tick()

    def _on_step_started(self, event: ev.StepStarted) -> None:
        section = self._sections.get(event.step)
        if event.attempt > 1 and section is not None:
            section.add_html(f"attempt {event.attempt}", "awf-log")
        else:
            section = Section(self, event)
            self._sections[event.step] = section
            self._order.append(section)
            self.steps.children = (*self.steps.children, section.widget)
        self._activity = f"running {event.step}"
        self._update_status()
        self._current_step = event.step
        self._refresh_diagram()

    def _on_step_output(self, event: ev.StepOutput) -> None:
        section = self._sections.get(event.step)
        if section is None:
            return
        if section.output is None:
            section.output = Output(section)
        section.output.append(event.text, event.stream)
        self.flusher.mark(section.output)

    def _on_turn_started(self, event: ev.TurnStarted) -> None:
        section = self._sections.get(event.step)
        if section is not None:
            self._finish_reply(section)
            section.tools_in_turn = False
            section.empty_reply = None
            section.new_reply(event.speaker)
            # The status line is left alone here: the new bubble shows that a reply comes.
            self._activity = f"running {event.step}"

    def _on_model_loading(self, event: ev.ModelLoading) -> None:
        # The first reply waits for the model to load: the status line says so meanwhile.
        if event.done:
            self._activity = f"running {event.step}"
        else:
            self._activity = f"{event.step}: loading model {event.model}…"
        self._update_status()

    def _on_tool_use(self, event: ev.AgentToolUse) -> None:
        section = self._sections.get(event.step)
        if section is None:
            return
        argument = event.argument
        if len(argument) > TOOL_ARGUMENT_CHARS:
            argument = argument[: TOOL_ARGUMENT_CHARS - 1] + "…"
        self.flush()
        section.add_html(f"🔧 <code>{esc(event.name)}({esc(argument)})</code>", "awf-tool")
        if section.reply is not None and not section.reply.finished:
            # Text after a tool call continues in a new bubble below the tool line.
            self._finish_reply(section)

    def _on_user_message(self, event: ev.UserMessage) -> None:
        section = self._sections.get(event.step)
        if section is None:
            return
        self.input.set_input_enabled(False)
        section.empty_reply = None  # it was the whole reply: it stays
        if event.speaker and event.speaker != ev.PERSON:  # scripted replies of a partner
            section.add_html(esc(event.speaker), "awf-speaker")
            section.add_html(esc(event.text), "awf-partner")
        else:
            section.add_html(esc(event.text), "awf-user")

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self._tokens += event.tokens
        self._tokens_estimated = self._tokens_estimated or event.tokens_estimated
        section = self._sections.get(event.step)
        if section is not None:
            if section.tools_in_turn:
                # The turn's text is shown already, in bubbles between its tool calls
                # (`event.text` may span them all): only what streamed since is finished.
                if section.reply is not None:
                    self._close_reply(section, event.interrupted)
            else:
                reply = section.reply or section.new_reply(event.speaker)
                self.flusher.forget(reply)
                reply.finish(event.text, event.interrupted)
                # A reply of tool calls only ends with no text, before its calls start: if
                # calls come next, this bubble goes (see `_tool_block`).
                if not reply.text.strip() and not event.interrupted:
                    section.empty_reply = reply
            section.reply = None
            section.tools_in_turn = False
        self._update_status()

    def _close_reply(self, section: Section, interrupted: bool = False) -> None:
        """End the open bubble where a tool call comes: with the text it has, or, when
        nothing was said before the call (a reply of tool calls only), remove it."""
        reply = section.reply
        section.reply = None
        if reply is None or reply.finished:
            return
        self.flusher.forget(reply)
        if reply.text.strip():
            reply.finish("", interrupted)
        else:
            section.drop_reply(reply)

    # --- tool calls (chat mode) ---------------------------------------------------------------

    def _tool_block(
        self, step: str, call_id: str, name: str, arguments: str = "", speaker: str = ""
    ) -> ToolBlock | None:
        """The block of a call, made (after the reply text that led to it) if new."""
        block = self._tools.get((step, call_id))
        if block is not None:
            return block
        section = self._sections.get(step)
        if section is None:
            return None
        self.flush()  # the reply text streamed so far goes before the block
        self._close_reply(section)
        if section.empty_reply is not None:
            section.drop_reply(section.empty_reply)
            section.empty_reply = None
        section.tools_in_turn = True
        block = ToolBlock(self, call_id, name, arguments, speaker)
        section.body.children = (*section.body.children, block.widget)
        self._tools[(step, call_id)] = block
        return block

    def _on_tool_started(self, event: ev.ToolCallStarted) -> None:
        self._tools.pop((event.step, event.call_id), None)  # an id a later round reuses
        self._tool_block(event.step, event.call_id, event.name, event.arguments, event.speaker)

    def _on_awaiting_confirmation(self, event: ev.AwaitingConfirmation) -> None:
        key = (event.step, event.call_id)
        block = self._tool_block(event.step, event.call_id, event.name, event.arguments)
        if block is None:
            return
        reader = self.input.reader
        if self.interactive and reader is not None:
            reader.new_question()
            self._confirming = key
            block.ask(
                lambda allowed: self.on_loop(lambda: self._answer(key, allowed)), asking_you=True
            )
        else:  # answered by `--reply`, or by nobody (refused)
            block.ask(None, asking_you=False)
        self._activity = f"{event.step}: waiting for your answer"
        self._update_status()

    def _answer(self, key: tuple[str, str], allowed: bool) -> None:
        """Allow or Deny was clicked (on the run's loop)."""
        reader = self.input.reader
        if self.finished or reader is None or self._confirming != key:
            return  # a late click: the question was answered, stopped, or never asked
        self._confirming = None
        block = self._tools.get(key)
        if block is not None:
            block.answered(allowed)
        self._activity = f"running {key[0]}"
        self._update_status()
        reader.answer(allowed)

    def _on_tool_finished(self, event: ev.ToolCallFinished) -> None:
        key = (event.step, event.call_id)
        block = self._tool_block(event.step, event.call_id, event.name, speaker=event.speaker)
        self._tools.pop(key, None)
        if block is not None:
            block.finish(event)
        if self._confirming == key:  # Stop while waiting for the answer
            self._confirming = None
            self._activity = f"running {event.step}"
            self._update_status()

    def _stop_tools(self, step: str | None = None) -> None:
        """The step (or the run) ended: calls with no result will not get one."""
        for key in [k for k in self._tools if step is None or k[0] == step]:
            self._tools.pop(key).stop()
            if self._confirming == key:
                self._confirming = None

    def _finish_reply(self, section: Section) -> None:
        reply = section.reply
        if reply is not None and not reply.finished:
            self.flusher.forget(reply)
            reply.finish("", interrupted=False)
        section.reply = None

    def _on_awaiting_input(self, event: ev.AwaitingInput) -> None:
        self.flush()
        self._activity = f"{event.step}: waiting for your message"
        if self.interactive:
            self.input.set_input_enabled(True)
        self._update_status()

    def _on_log(self, event: ev.LogMessage) -> None:
        self._line(event.step, esc(event.message), "awf-log")

    def _on_warning(self, event: ev.RunWarning) -> None:
        self._line(event.step, "⚠ " + esc(event.message), "awf-warning")

    def _on_error(self, event: ev.RunError) -> None:
        self._line(event.step, error_html(event.message), "awf-error")

    def _line(self, step: str, value: str, css_class: str) -> None:
        self.flush()
        section = self._sections.get(step)
        if section is not None:
            section.add_html(value, css_class)
            return
        item = self.html(value, css_class)
        self.notes.children = (*self.notes.children, item)

    def _on_step_finished(self, event: ev.StepFinished) -> None:
        section = self._sections.get(event.step)
        if section is None:
            return
        self.flush()
        self._finish_reply(section)
        self._stop_tools(event.step)
        if event.error and event.status == "failed":
            section.add_html(error_html(event.error), "awf-error")
        section.finish(event)
        self._update_status()
        self._step_status[event.step] = event.status
        self._refresh_diagram()

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        self.flush()
        for section in self._order:
            self._finish_reply(section)
        self._stop_tools()
        self.finished = True
        self._cancel_timers()
        self._tokens = event.tokens or self._tokens
        self._tokens_estimated = event.summary.tokens_estimated
        self.summary = event.summary
        self._activity = event.status
        self._update_status()
        classes = ("awf-summary", "awf-failed") if event.status == "failed" else ("awf-summary",)
        summary = self.html(summary_html(self.summary), *classes)
        kept = tuple(c for c in self.widget.children if c is not self.input.widget)
        self.widget.children = (*kept, summary)
        self._current_step = ""
        self._refresh_diagram()
        self._save_static()

    def _save_static(self) -> None:
        """Put the static rendering of the run next to the widget in the cell's output."""
        if self.display_handle is None:
            return
        from awf_nb.frontends.notebook.panel_static import static_html

        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/html"] = static_html(self.widget)
        self.display_handle.update(bundle, raw=True)

    def _refresh_diagram(self) -> None:
        """Redraw the workflow diagram with the run's progress, when it is shown."""
        if self.workflow is None:
            return
        if not self.diagram_toggle.value:
            if self.diagram.outputs:
                self.diagram.outputs = ()
            return
        from awf_nb.diagram import marks_for
        from awf_nb.frontends.notebook.diagram import diagram_bundle

        marks = marks_for(self._step_status, self._current_step)
        bundle = diagram_bundle(self.workflow, marks=marks)
        self.stats.diagram_updates += 1
        self.diagram.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)

    # --- flushing -----------------------------------------------------------------------------

    def _capture_loop(self) -> None:
        if self._loop is None:
            with contextlib.suppress(RuntimeError):
                self._loop = asyncio.get_running_loop()

    def flush(self) -> None:
        """Send every buffered change now (one update per changed widget)."""
        self.flusher.flush()

    def _schedule_tick(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self.finished:
            self._tick_handle = loop.call_later(self.status_interval, self._tick)

    def _tick(self) -> None:
        self._tick_handle = None
        if self.finished:
            return
        # At most one message per flush: while text streams, the clock waits.
        if self.flusher.quiet():
            self._update_status()
        self._schedule_tick()

    def _cancel_timers(self) -> None:
        self.flusher.cancel()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    # --- the status line ----------------------------------------------------------------------

    def _update_status(self) -> None:
        value = self._status_html()
        if value != self._status_sent:
            self._status_sent = self.status.value = value

    def _status_html(self) -> str:
        title = f"<b>{esc(self.title)}</b>"
        if self.finished and self.summary is not None:
            s = self.summary
            color = STATUS_COLORS.get(s.status, "inherit")
            return f'{title} · <b style="color:{color}">{esc(s.status)}</b> {esc(s.figures())}'
        parts = [title, esc(self._activity), format_elapsed(time.monotonic() - self._started)]
        if self._tokens:
            parts.append(format_tokens(self._tokens, self._tokens_estimated))
        return " · ".join(parts)


def display_panel(panel: RunPanel) -> None:
    """Show the panel in the current cell's output (with Enter-to-send when it asks).

    The output gets a display id: when the run ends it is updated to carry a static HTML
    rendering of the run too, for readers of the saved notebook (panel_static.py)."""
    from IPython.display import display

    if panel.interactive:
        display({"application/javascript": ENTER_TO_SEND_JS, "text/plain": ""}, raw=True)
    panel.display_handle = display(panel.widget, display_id=True)


_HANDLERS: dict[type, Callable[[RunPanel, Any], None]] = {
    ev.RunStarted: RunPanel._on_run_started,
    ev.StepStarted: RunPanel._on_step_started,
    ev.StepOutput: RunPanel._on_step_output,
    ev.TurnStarted: RunPanel._on_turn_started,
    ev.ModelLoading: RunPanel._on_model_loading,
    ev.AgentToolUse: RunPanel._on_tool_use,
    ev.ToolCallStarted: RunPanel._on_tool_started,
    ev.AwaitingConfirmation: RunPanel._on_awaiting_confirmation,
    ev.ToolCallFinished: RunPanel._on_tool_finished,
    ev.UserMessage: RunPanel._on_user_message,
    ev.TurnFinished: RunPanel._on_turn_finished,
    ev.AwaitingInput: RunPanel._on_awaiting_input,
    ev.LogMessage: RunPanel._on_log,
    ev.RunWarning: RunPanel._on_warning,
    ev.RunError: RunPanel._on_error,
    ev.StepFinished: RunPanel._on_step_finished,
    ev.RunFinished: RunPanel._on_run_finished,
}
