"""The live run panel: one ipywidgets panel per run, fed by the run's events.

Layout (top to bottom): the status line (workflow, state, running step, elapsed time,
tokens); one collapsible section per executed step (command output, agent replies rendered
as Markdown, chat bubbles, tool uses, tool-call blocks with Allow / Deny when a call needs
the person's approval, warnings, errors in red); the conversation controls (a text box
with Send / End conversation, and Stop); the summary when the run ends.

Streaming without flooding the kernel: `emit` only buffers text; a flush at most every
`FLUSH_INTERVAL` seconds (10 Hz) sends each changed widget once (panel_flush.py), and only
what changed: replies and command output are `StreamHTML` widgets (stream_view.py) that
receive finished blocks once and the open one as a diff. The status line is sent when what it
says changes; its elapsed time ticks in the browser (status_view.py). Widgets are changed on
the run's loop only. When the run
ends, the widget view in the cell's output gives way to a static HTML copy of the panel
(panel_static.py), so the saved notebook shows the run without a kernel or network.

The pieces: panel_items.py (sections, replies, output), panel_controls.py (the text box
and buttons), panel_tools.py (tool-call blocks), panel_flush.py (when changes are sent).

Why one module: `RunPanel` is where each of the run's events meets the widget tree, and
every handler reads and changes the same state — the step's section, the reply being
written, what the controls offer (Stop only while something is written, stepping into an
exchange), the timers — which the static copy then takes whole; how each piece looks and
behaves is in the modules above.
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
    earlier_html,
    error_html,
)
from awf_nb.frontends.notebook.panel_tools import ToolBlock
from awf_nb.frontends.notebook.status_view import StatusLine
from awf_nb.frontends.notebook.summary import STATUS_COLORS, esc, summary_html

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.panel_branch import Brancher, StartBranch
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.store import Store
    from awf_nb.workflow.model import Workflow

FLUSH_INTERVAL = 0.1  # seconds between flushes of streamed text: 10 Hz
STOP_PATIENCE = 2.0  # seconds Stop waits for the next reply of an exchange to stop it
STOP_RETRY = 0.05
TOOL_ARGUMENT_CHARS = 200


class RunPanel:
    """An `EventSink` that draws a run as widgets. `widget` is what to display."""

    def __init__(
        self,
        title: str,
        *,
        interactive: bool = False,
        flush_interval: float = FLUSH_INTERVAL,
        workflow: Workflow | None = None,
        store: Store | None = None,
        start_branch: StartBranch | None = None,
    ) -> None:
        """`store`: where the run is kept; with it and `start_branch` (how a branch's run
        is started and shown: the notebook frontend's), every message and step offers
        "Branch from here" (panel_branch.py)."""
        self.title = title
        self.store = store
        self.start_branch = start_branch
        # With the workflow, a "Diagram" toggle shows it live: the running step highlighted,
        # finished steps marked. Off by default; redrawn only while shown.
        self.workflow = workflow
        self._step_status: dict[str, str] = {}
        self._step_errors: list[str] = []  # the errors shown in the steps' sections
        self._stop: Callable[[], object] | None = None
        self._cancel: Callable[[], object] | None = None
        self._reply_running = False  # a reply or tool call is being written: Stop applies
        self._stepping_in: list[str | None] = []  # a message typed into an exchange, waiting
        self._current_step = ""
        self.interactive = interactive
        self.stats = PanelStats()
        self.run_id = ""
        self.finished = False
        self.summary: RunSummary | None = None
        self.display_handle: Any = None  # IPython's DisplayHandle once displayed
        # When the run ends, replace the live output in place (the cell has returned: a
        # background run) instead of adding the static copy after it (`_save_static`).
        self.static_in_place = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sections: dict[str, Section] = {}
        self._order: list[Section] = []
        # Tool calls by (step, call id): each keeps its block until the call ends.
        self._tools: dict[tuple[str, str], ToolBlock] = {}
        self._confirming: tuple[str, str] | None = None  # the call whose buttons are shown
        self.flusher = Flusher(flush_interval, self.stats, lambda: self._loop)
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
        self.status = StatusLine(layout=self.shared_layout, _dom_classes=("awf-status",))
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
        self.brancher: Brancher | None = None
        if self.store is not None and self.start_branch is not None and self.interactive:
            from awf_nb.frontends.notebook.panel_branch import Brancher

            self.brancher = Brancher(self, self.store, self.start_branch)
            top.append(self.brancher.request)
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
        stop: Callable[[], object] | None = None,
        cancel: Callable[[], object] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Connect the buttons: Send/End to `reader`, Stop to `stop` (`Runner.interrupt_turn`:
        truthy when a reply was stopped), Cancel run to `cancel` (`Runner.cancel`)."""
        self.input.reader = reader
        self._stop = stop
        self._cancel = cancel
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

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The run's loop, once the run has started (or `attach` gave it)."""
        return self._loop

    def later(self, delay: float, action: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            action()
        else:
            loop.call_later(delay, action)

    def stop_reply(self, deadline: float | None = None) -> None:
        """Stop the reply (or tool calls) being written. Between two replies of an exchange
        there is none for a moment: Stop is tried again until one starts, for at most
        STOP_PATIENCE seconds."""
        stop = self._stop
        if stop is None or self.finished:
            return
        if stop():
            return
        deadline = time.monotonic() + STOP_PATIENCE if deadline is None else deadline
        if self._reply_running and time.monotonic() < deadline:
            self.later(STOP_RETRY, lambda: self.stop_reply(deadline))

    def cancel_run(self) -> None:
        if self._cancel is None or self.finished:
            return
        self._activity = "cancelling"
        self._update_status()
        self._cancel()

    def step_in(self, message: str | None) -> None:
        """The person typed into an exchange between agents: stop the reply being written;
        at the pause that follows (`_on_awaiting_input`) the message answers in the
        partner's place (None ends the exchange)."""
        self._stepping_in = [message]
        self.stop_reply()

    # --- what "Branch from here" asks of the panel (panel_branch.py) ---------------------------

    def sections(self) -> list[Section]:
        """The step sections, in the order shown."""
        return list(self._order)

    def show_branches(self) -> None:
        """Put the branch area (editor, branch panels, diffs) below the steps, once."""
        brancher = self.brancher
        if brancher is None or brancher.area in self.widget.children:
            return
        children = list(self.widget.children)
        at = children.index(self.steps) + 1
        self.widget.children = (*children[:at], brancher.area, *children[at:])

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
        self.input.run_ended()
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

    def _on_step_started(self, event: ev.StepStarted) -> None:
        section = self._sections.get(event.step)
        if event.attempt > 1 and section is not None:
            section.add_html(f"attempt {event.attempt}", "awf-log")
        else:
            section = Section(self, event)
            section.partner = self._partner_of(event.step)
            if section.partner:  # say what typing does before anyone can type
                self.input.set_exchange((section.name, section.partner))
            self._sections[event.step] = section
            self._order.append(section)
            self.steps.children = (*self.steps.children, section.widget)
        self._activity = f"running {event.step}"
        self._update_status()
        self._current_step = event.step
        self._refresh_diagram()

    def _partner_of(self, step: str) -> str:
        """The partner agent of a conversation step, as the workflow names it ("" if none)."""
        model = self.workflow.steps.get(step) if self.workflow is not None else None
        partner = getattr(getattr(model, "conversation", None), "partner", None)
        return "" if partner is None else str(partner.name)

    def _set_reply_running(self, running: bool) -> None:
        self._reply_running = running
        self.input.set_reply_running(running)

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
            if event.speaker:
                section.met_partner(event.speaker)
            section.new_reply(event.speaker)
            # The status line is left alone here: the new bubble shows that a reply comes.
            self._activity = f"running {event.step}"
            self._set_reply_running(True)
            if section.partner and self.input.exchange is None:
                self.input.set_exchange((section.name, section.partner))

    def _on_model_loading(self, event: ev.ModelLoading) -> None:
        # The first reply waits for the model to load: the status line says so meanwhile.
        if event.done:
            self._activity = f"running {event.step}"
        else:
            self._activity = f"{event.step}: loading model {event.model}…"
        self._update_status()

    def _on_conversation_resumed(self, event: ev.ConversationResumed) -> None:
        """What was said before the run was resumed: shown dimmed above the new turns."""
        section = self._sections.get(event.step)
        if section is not None and event.earlier:
            section.earlier_messages = event.left_out + len(event.earlier)
            section.add_html(earlier_html(event, section.name), "awf-earlier")

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
            section.met_partner(event.speaker)
            if self.input.exchange is None:
                self.input.set_exchange((section.name, section.partner))
            section.add_html(esc(event.speaker), "awf-speaker")
            section.add_html(esc(event.text), "awf-partner")
        elif event.turn == 1 and not event.speaker:  # the step's prompt: not the person's
            section.add_html(esc(event.text), "awf-user", "awf-prompt")
        else:
            if section.partner:  # the person stepping into an exchange between agents
                section.add_html("you", "awf-speaker")
            section.add_html(esc(event.text), "awf-user")
        section.bubbles.append(event.text)

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self._tokens += event.tokens
        self._tokens_estimated = self._tokens_estimated or event.tokens_estimated
        self._set_reply_running(False)
        section = self._sections.get(event.step)
        if section is not None:
            if section.tools_in_turn:
                # The turn's text is shown already, in bubbles between its tool calls
                # (`event.text` may span them all): only what streamed since is finished.
                if section.reply is not None:
                    self._close_reply(section, event.interrupted, event.cut)
            else:
                reply = section.reply or section.new_reply(event.speaker)
                self.flusher.forget(reply)
                reply.finish(event.text, event.interrupted, event.cut)
                # A reply of tool calls only ends with no text, before its calls start: if
                # calls come next, this bubble goes (see `_tool_block`).
                if not reply.text.strip() and not event.interrupted:
                    section.empty_reply = reply
            section.reply = None
            section.tools_in_turn = False
        self._update_status()

    def _close_reply(self, section: Section, interrupted: bool = False, cut: bool = False) -> None:
        """End the open bubble where a tool call comes: with the text it has, or, when
        nothing was said before the call (a reply of tool calls only), remove it."""
        reply = section.reply
        section.reply = None
        if reply is None or reply.finished:
            return
        self.flusher.forget(reply)
        if reply.text.strip():
            reply.finish("", interrupted, cut)
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
        self._set_reply_running(True)  # Stop stops the calls running
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
        self._set_reply_running(False)
        reader = self.input.reader
        if self._stepping_in and reader is not None:  # typed while the agents talked
            reader.submit(self._stepping_in.pop())
            return
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
        self._set_reply_running(False)
        if section.partner:
            self.input.set_exchange(None)
            if self._stepping_in:
                self._stepping_in.clear()
                self.note("The agents had finished: your message was not sent.")
        self._finish_reply(section)
        self._stop_tools(event.step)
        if event.error and event.status == "failed":
            section.add_html(error_html(event.error), "awf-error")
            self._step_errors.append(event.error)
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
        self.input.run_ended()
        self._cancel_timers()
        self._tokens = event.tokens or self._tokens
        self._tokens_estimated = event.summary.tokens_estimated
        self.summary = event.summary
        self._activity = event.status
        self._update_status()
        classes = ("awf-summary", "awf-failed") if event.status == "failed" else ("awf-summary",)
        # An error its step states already is not repeated in the summary.
        shown = any(error in self.summary.error for error in self._step_errors)
        summary = self.html(summary_html(self.summary, error_shown=shown), *classes)
        kept = tuple(c for c in self.widget.children if c is not self.input.widget)
        self.widget.children = (*kept, summary)
        self._current_step = ""
        self._refresh_diagram()
        self._save_static()

    def _save_static(self) -> None:
        """Put the static rendering of the run in the cell's output, in the widget's place
        (panel_static.py says why the widget view must go, and how)."""
        if self.display_handle is None:
            return
        from awf_nb.frontends.notebook.panel_static import (
            replace_live_output,
            static_html,
            static_text,
        )

        bundle = {"text/html": static_html(self.widget), "text/plain": static_text(self.widget)}
        replace_live_output(self.display_handle, bundle, in_place=self.static_in_place)

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

    def _cancel_timers(self) -> None:
        self.flusher.cancel()

    # --- the status line ----------------------------------------------------------------------

    def _update_status(self) -> None:
        """Send the status line when what it says changed (the browser ticks its clock)."""
        elapsed = time.monotonic() - self._started
        value = self._status_html(elapsed)
        if value != self._status_sent:
            self._status_sent = value
            self.status.show(value, elapsed=elapsed, running=not self.finished)

    def _status_html(self, elapsed: float) -> str:
        title = f"<b>{esc(self.title)}</b>"
        if self.finished and self.summary is not None:
            s = self.summary
            color = STATUS_COLORS.get(s.status, "inherit")
            return f'{title} · <b style="color:{color}">{esc(s.status)}</b> {esc(s.figures())}'
        clock = f'<span class="awf-elapsed">{format_elapsed(elapsed)}</span>'
        parts = [title, esc(self._activity), clock]
        if self._tokens:
            parts.append(format_tokens(self._tokens, self._tokens_estimated))
        return " · ".join(parts)


def display_panel(panel: RunPanel) -> None:
    """Show the panel in the current cell's output (with Enter-to-send when it asks).

    The output gets a display id: when the run ends the widget view makes way for a static
    rendering of the run, for readers of the saved notebook (`RunPanel._save_static`)."""
    from IPython.display import display

    from awf_nb.frontends.notebook.panel_static import show_live

    if panel.interactive:
        script = ENTER_TO_SEND_JS
        if panel.brancher is not None:
            from awf_nb.frontends.notebook.panel_branch import BRANCH_JS

            script += "\n" + BRANCH_JS
        display({"application/javascript": script, "text/plain": ""}, raw=True)
    panel.display_handle = show_live(panel.widget)


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
    ev.ConversationResumed: RunPanel._on_conversation_resumed,
    ev.AwaitingInput: RunPanel._on_awaiting_input,
    ev.LogMessage: RunPanel._on_log,
    ev.RunWarning: RunPanel._on_warning,
    ev.RunError: RunPanel._on_error,
    ev.StepFinished: RunPanel._on_step_finished,
    ev.RunFinished: RunPanel._on_run_finished,
}
