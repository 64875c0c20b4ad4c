"""The live run panel: one ipywidgets panel per run, fed by the run's events.

Layout (top to bottom): the status line (workflow, state, running step, elapsed time,
tokens); one collapsible section per executed step (command output, agent replies rendered
as Markdown, chat bubbles, tool uses, warnings, errors in red); the conversation controls
(a text box with Send / End conversation, and Stop); the summary when the run ends.

Streaming without flooding the kernel: `emit` only buffers text; a flush at most every
`FLUSH_INTERVAL` seconds (10 Hz) sends each changed widget once, and turn/step/run
boundaries flush at once. Every assistant reply is its own HTML widget, so a finished reply
is never sent again; the status line's clock only ticks in a flush that has nothing else to
send. Model output is untrusted: Markdown is rendered with raw HTML escaped.

Widget callbacks can arrive on another thread (ipykernel 7 subshells), so button handlers
only hand work to the run's loop with `call_soon_threadsafe`; widgets are changed on that
loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Protocol

import ipywidgets as widgets
from ipywidgets.widgets.widget_string import HTMLStyle
from markdown_it import MarkdownIt

from awf_nb.engine import events as ev
from awf_nb.engine.summary import STATUS_MARKS, RunSummary, format_duration, format_elapsed
from awf_nb.frontends.notebook.summary import STATUS_COLORS, esc, summary_html

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.workflow.model import Workflow

FLUSH_INTERVAL = 0.1  # seconds between flushes of streamed text: 10 Hz
STATUS_INTERVAL = 1.0  # the status line's clock
OUTPUT_CHUNK_CHARS = 8_000  # a command's output is split into widgets of this size…
MAX_OUTPUT_CHUNKS = 32  # …and only the newest ones are kept in the panel
TOOL_ARGUMENT_CHARS = 200
SEND_SETTLE = 0.1  # seconds from a Send click to reading the text box (see `_send`)
SEND_PATIENCE = 1.0  # how long an empty box is looked at again before saying it is empty


def _asset(name: str) -> str:
    return (files("awf_nb.frontends.notebook") / name).read_text(encoding="utf-8")


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_markdown = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)

# The panel's stylesheet and its browser-side script are files of the package, so they
# can be read and linted as CSS and JavaScript (panel.css, panel.js).
PANEL_CSS = "<style>\n" + _asset("panel.css") + "</style>"
# Enter sends, Shift+Enter inserts a new line (see the comment at the top of panel.js).
ENTER_TO_SEND_JS = _asset("panel.js")


def render_markdown(text: str) -> str:
    """Markdown to HTML with raw HTML escaped (model output is untrusted)."""
    return _markdown.render(text)


def clean_output(text: str) -> str:
    """Terminal output for an HTML <pre>: no ANSI escapes, `\\r` progress lines collapsed."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return text


class PanelBox(widgets.VBox):
    """The panel's root widget; its text form (shown by text-only frontends) stays short."""

    def __init__(self, title: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._awf_title = title

    def __repr__(self) -> str:
        return f"awf run panel: {self._awf_title}"


@dataclass
class PanelStats:
    """What the panel sent, for tests and benchmarks."""

    flushes: int = 0  # flushes that sent at least one update
    updates: int = 0  # widget value updates sent by flushes
    diagram_updates: int = 0  # redraws of the live diagram (one per step start/end)


class _Streamed(Protocol):
    """Something whose text grows by small pieces and is sent at flush time."""

    def flush(self) -> bool:
        """Send the widget's new value if it changed; return whether it did."""
        ...


class _Reply:
    """One assistant reply: one HTML widget, re-rendered at each flush until finished."""

    def __init__(self, widget: widgets.HTML) -> None:
        self.widget = widget
        self.parts: list[str] = []
        self.finished = False
        self._sent = ""

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def flush(self) -> bool:
        text = self.text
        value = render_markdown(text) if text else '<p class="awf-note">…</p>'
        if value == self._sent:
            return False
        self._sent = self.widget.value = value
        return True

    def finish(self, text: str, interrupted: bool) -> None:
        if text:
            self.parts = [text]
        self.finished = True
        value = render_markdown(self.text) if self.text else ""
        if interrupted:
            value += '<p class="awf-note">■ reply interrupted</p>'
        if not value:
            value = '<p class="awf-note">(empty reply)</p>'
        if value != self._sent:
            self._sent = self.widget.value = value


class _Output:
    """A command's output: `<pre>` widgets of at most OUTPUT_CHUNK_CHARS; only the last one
    changes, so long outputs are not resent at every flush."""

    def __init__(self, section: _Section) -> None:
        self.section = section
        self.chunks: list[widgets.HTML] = []
        self.tail: list[tuple[str, str]] = []  # (stream, text) of the last chunk
        self.tail_chars = 0
        self.dropped = 0
        self._sent = ""

    def append(self, text: str, stream: str) -> None:
        if self.tail and self.tail[-1][0] == stream:
            self.tail[-1] = (stream, self.tail[-1][1] + text)
        else:
            self.tail.append((stream, text))
        self.tail_chars += len(text)

    def flush(self) -> bool:
        if not self.chunks:
            self.chunks.append(self.section.add_html("", "awf-output"))
        value = "<pre>" + "".join(_pre_piece(stream, text) for stream, text in self.tail)
        value += "</pre>"
        changed = value != self._sent
        if changed:
            self._sent = self.chunks[-1].value = value
        if self.tail_chars >= OUTPUT_CHUNK_CHARS:
            self._roll()
        return changed

    def _roll(self) -> None:
        self.tail, self.tail_chars, self._sent = [], 0, ""
        self.chunks.append(self.section.add_html("", "awf-output"))
        if len(self.chunks) > MAX_OUTPUT_CHUNKS:
            oldest = self.chunks.pop(0)
            self.dropped += 1
            self.section.remove(oldest)
            oldest.close()
            self.section.set_output_note(
                f"… {self.dropped * OUTPUT_CHUNK_CHARS // 1000}k+ characters of earlier output "
                "not shown (the full output is in the run's state)"
            )


def _pre_piece(stream: str, text: str) -> str:
    shown = esc(clean_output(text))
    return f'<span class="awf-stderr">{shown}</span>' if stream == "stderr" else shown


class _Section:
    """The collapsible section of one step execution."""

    def __init__(self, panel: RunPanel, event: ev.StepStarted) -> None:
        self.panel = panel
        self.name = event.step
        self.reply: _Reply | None = None
        self.output: _Output | None = None
        self._output_note: widgets.HTML | None = None
        what = event.kind if event.mode in ("", "single") else f"{event.kind}, {event.mode}"
        self.what = f"{what}, {event.detail}" if event.detail else what
        self.body = widgets.VBox(layout=panel.shared_layout, _dom_classes=("awf-step-body",))
        self.widget = widgets.Accordion(
            children=[self.body],
            titles=(f"● {self.name} · {self.what}",),
            selected_index=0,
            layout=panel.shared_layout,
            _dom_classes=("awf-step",),
        )

    def add_html(self, value: str, css_class: str) -> widgets.HTML:
        item = self.panel.html(value, css_class)
        self.body.children = (*self.body.children, item)
        return item

    def remove(self, item: widgets.Widget) -> None:
        self.body.children = tuple(c for c in self.body.children if c is not item)

    def set_output_note(self, text: str) -> None:
        if self._output_note is None:
            self._output_note = self.panel.html("", "awf-log")
            self.body.children = (self._output_note, *self.body.children)
        self._output_note.value = esc(text)

    def new_reply(self) -> _Reply:
        self.reply = _Reply(self.add_html('<p class="awf-note">…</p>', "awf-assistant"))
        return self.reply

    def finish(self, event: ev.StepFinished) -> None:
        extra = f" · {event.tokens} tokens" if event.tokens else ""
        mark = STATUS_MARKS.get(event.status, "·")
        word = "" if event.status == "completed" else f" · {event.status}"
        self.widget.set_title(
            0, f"{mark} {self.name} · {self.what} · {format_duration(event.duration)}{extra}{word}"
        )


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
        self.flush_interval = flush_interval
        self.status_interval = status_interval
        self.stats = PanelStats()
        self.run_id = ""
        self.finished = False
        self.summary: RunSummary | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: WidgetReader | None = None
        self._stop: Callable[[], str] | None = None
        self._sections: dict[str, _Section] = {}
        self._order: list[_Section] = []
        self._dirty: dict[_Streamed, None] = {}  # insertion-ordered set
        self._flush_handle: asyncio.TimerHandle | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._last_flush = float("-inf")
        self._started = time.monotonic()
        self._tokens = 0
        self._activity = "starting"
        self._status_sent = ""
        self._awaiting = False
        self._build()

    # --- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.shared_layout = widgets.Layout()
        self.html_style = HTMLStyle()
        css = widgets.HTML(PANEL_CSS, layout=widgets.Layout(display="none"))
        self.status = self.html("", "awf-status")
        self.notes = widgets.VBox(layout=self.shared_layout, _dom_classes=("awf-notes",))
        self.steps = widgets.VBox(layout=self.shared_layout, _dom_classes=("awf-steps",))
        self._text_layout = widgets.Layout(width="100%")
        self.text = self._new_text_box()
        self.send_button = widgets.Button(
            description="Send", button_style="primary", _dom_classes=("awf-send",)
        )
        self.end_button = widgets.Button(description="End conversation", _dom_classes=("awf-end",))
        self.stop_button = widgets.Button(
            description="Stop", button_style="warning", _dom_classes=("awf-stop",)
        )
        self.send_button.on_click(lambda _: self._on_loop(self._send))
        self.end_button.on_click(lambda _: self._on_loop(self._end))
        self.stop_button.on_click(lambda _: self._on_loop(self._stop_clicked))
        self._set_input_enabled(False)
        if self.interactive:
            buttons = widgets.HBox([self.send_button, self.end_button, self.stop_button])
        else:
            buttons = widgets.HBox([self.stop_button])
        # The text box lives in a box of its own, so replacing it (see `_renew_text_box`)
        # changes only that box's children: replacing a child of `controls` would make the
        # browser rebuild the button row after it, losing a click in progress.
        self.text_holder = widgets.Box([self.text], layout=widgets.Layout(width="100%"))
        self.controls = widgets.VBox(
            [self.text_holder, buttons] if self.interactive else [buttons],
            _dom_classes=("awf-controls",),
        )
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
            children=[*top, self.notes, self.steps, self.controls],
            _dom_classes=("awf-panel",),
        )
        self._update_status()

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
        self._on_loop(lambda: self._renew_text_box(box))

    def _renew_text_box(self, box: widgets.Textarea, value: str | None = None) -> None:
        """Put a fresh text box (holding `value`, default the old box's text) in its place.

        In the browser, ipywidgets sends a widget's next change only once the kernel has
        reported idle for its previous one; ipykernel >= 7.4 handles the comm messages of an
        awaiting cell without reporting busy/idle, so a text box would reach the kernel once
        and never again while the cell runs. A box that has synced is therefore replaced by
        a new one (a new widget model), and every box syncs at most once.
        """
        if box is not self.text or self.finished:
            return
        fresh = self._new_text_box(box.value if value is None else value)
        self.text = fresh
        self.text_holder.children = (fresh,)
        box.unobserve(self._on_text_synced, names="value")
        box.close()

    def attach(
        self,
        *,
        reader: WidgetReader | None = None,
        stop: Callable[[], str] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Connect the buttons: Send/End to `reader`, Stop to `stop` (`Runner.interrupt`)."""
        self._reader = reader
        self._stop = stop
        if loop is not None:
            self._loop = loop

    def html(self, value: str, *css_classes: str) -> widgets.HTML:
        """An HTML item; classes given at creation (`add_class` later costs a message)."""
        return widgets.HTML(
            value, layout=self.shared_layout, style=self.html_style, _dom_classes=css_classes
        )

    # --- button handlers (any thread in, the loop's thread out) -------------------------------

    def _on_loop(self, action: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None:
            action()
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run is long over
            loop.call_soon_threadsafe(action)

    def _send(self) -> None:
        """Send the text box's message, read a moment after the click: ipykernel 7 may
        handle the box's update and the click on different threads, so the text can arrive
        just after the click."""
        if self.finished or self._reader is None or not self._awaiting:
            return  # a click on a disabled button (what a browser would not even send)
        self._set_input_enabled(False)  # also stops a double click from sending twice
        deadline = time.monotonic() + SEND_PATIENCE
        self._later(SEND_SETTLE, lambda: self._send_text(deadline))

    def _send_text(self, deadline: float) -> None:
        if self.finished or self._reader is None:
            return
        message = self.text.value
        if not message.strip():
            if time.monotonic() < deadline:
                self._later(SEND_SETTLE, lambda: self._send_text(deadline))
                return
            self._set_input_enabled(True)
            self.note("Type a message first, or click End conversation to finish.")
            return
        self._renew_text_box(self.text, "")
        self._reader.submit(message)

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            action()
        else:
            loop.call_later(delay, action)

    def _end(self) -> None:
        if self.finished or self._reader is None or not self._awaiting:
            return
        self._set_input_enabled(False)
        self._reader.end()

    def _stop_clicked(self) -> None:
        if self.finished or self._stop is None:
            return
        if self._stop() == "run":
            self._activity = "cancelling"
            self._set_input_enabled(False)
            self._update_status()

    def _set_input_enabled(self, enabled: bool) -> None:
        self._awaiting = enabled
        self.send_button.disabled = not enabled
        self.end_button.disabled = not enabled

    # --- public helpers for the magic -------------------------------------------------------

    def note(self, text: str) -> None:
        """A grey line under the status line (e.g. how to get the result of a background run)."""
        item = self.html(f'<span class="awf-note">{esc(text)}</span>', "awf-note-line")
        self.notes.children = (*self.notes.children, item)

    def show_error(self, message: str) -> None:
        """An error in red, one paragraph, outside any step (e.g. an internal error)."""
        item = self.html(_error_html(message), "awf-error")
        self.notes.children = (*self.notes.children, item)

    def close_controls(self) -> None:
        self._set_input_enabled(False)
        self.widget.children = tuple(c for c in self.widget.children if c is not self.controls)

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

    # --- events -----------------------------------------------------------------------------

    def emit(self, event: ev.RunEvent) -> None:
        if type(event) is ev.AgentText:  # the hot path: once per streamed token
            section = self._sections.get(event.step)
            if section is None:
                return
            reply = section.reply if section.reply is not None else section.new_reply()
            reply.parts.append(event.text)
            self._mark_dirty(reply)
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
            section = _Section(self, event)
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
            section.output = _Output(section)
        section.output.append(event.text, event.stream)
        self._mark_dirty(section.output)

    def _on_turn_started(self, event: ev.TurnStarted) -> None:
        section = self._sections.get(event.step)
        if section is not None:
            self._finish_reply(section)
            section.new_reply()
            # The status line is left alone here: the new bubble shows that a reply comes.
            self._activity = f"running {event.step}"

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
        self._set_input_enabled(False)
        section.add_html(esc(event.text), "awf-user")

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self._tokens += event.tokens
        section = self._sections.get(event.step)
        if section is not None:
            reply = section.reply or section.new_reply()
            self._dirty.pop(reply, None)
            reply.finish(event.text, event.interrupted)
            section.reply = None
        self._update_status()

    def _finish_reply(self, section: _Section) -> None:
        reply = section.reply
        if reply is not None and not reply.finished:
            self._dirty.pop(reply, None)
            reply.finish("", interrupted=False)
        section.reply = None

    def _on_awaiting_input(self, event: ev.AwaitingInput) -> None:
        self.flush()
        self._activity = f"{event.step}: waiting for your message"
        if self.interactive:
            self._set_input_enabled(True)
        self._update_status()

    def _on_log(self, event: ev.LogMessage) -> None:
        self._line(event.step, esc(event.message), "awf-log")

    def _on_warning(self, event: ev.RunWarning) -> None:
        self._line(event.step, "⚠ " + esc(event.message), "awf-warning")

    def _on_error(self, event: ev.RunError) -> None:
        self._line(event.step, _error_html(event.message), "awf-error")

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
        if event.error and event.status == "failed":
            section.add_html(_error_html(event.error), "awf-error")
        section.finish(event)
        self._update_status()
        self._step_status[event.step] = event.status
        self._refresh_diagram()

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        self.flush()
        for section in self._order:
            self._finish_reply(section)
        self.finished = True
        self._cancel_timers()
        self._tokens = event.tokens or self._tokens
        self.summary = event.summary
        self._activity = event.status
        self._update_status()
        classes = ("awf-summary", "awf-failed") if event.status == "failed" else ("awf-summary",)
        summary = self.html(summary_html(self.summary), *classes)
        kept = tuple(c for c in self.widget.children if c is not self.controls)
        self.widget.children = (*kept, summary)
        self._current_step = ""
        self._refresh_diagram()

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

    def _mark_dirty(self, item: _Streamed) -> None:
        self._dirty[item] = None
        if self._flush_handle is not None:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            self.flush()
            return
        delay = max(0.0, self._last_flush + self.flush_interval - time.monotonic())
        self._flush_handle = loop.call_later(delay, self.flush)

    def flush(self) -> None:
        """Send every buffered change now (one update per changed widget)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        self._last_flush = time.monotonic()
        sent = sum(1 for item in dirty if item.flush())
        if sent:
            self.stats.flushes += 1
            self.stats.updates += sent

    def _schedule_tick(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self.finished:
            self._tick_handle = loop.call_later(self.status_interval, self._tick)

    def _tick(self) -> None:
        self._tick_handle = None
        if self.finished:
            return
        # At most one message per flush: while text streams, the clock waits.
        streaming = time.monotonic() - self._last_flush < 2 * self.flush_interval
        if not streaming and not self._dirty and self._flush_handle is None:
            self._update_status()
        self._schedule_tick()

    def _cancel_timers(self) -> None:
        for handle in (self._flush_handle, self._tick_handle):
            if handle is not None:
                handle.cancel()
        self._flush_handle = self._tick_handle = None

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
            parts.append(f"{self._tokens} tokens")
        return " · ".join(parts)


def _error_html(message: str) -> str:
    return "<p>" + esc(message).replace("\n", "<br>") + "</p>"


_HANDLERS: dict[type, Callable[[RunPanel, Any], None]] = {
    ev.RunStarted: RunPanel._on_run_started,
    ev.StepStarted: RunPanel._on_step_started,
    ev.StepOutput: RunPanel._on_step_output,
    ev.TurnStarted: RunPanel._on_turn_started,
    ev.AgentToolUse: RunPanel._on_tool_use,
    ev.UserMessage: RunPanel._on_user_message,
    ev.TurnFinished: RunPanel._on_turn_finished,
    ev.AwaitingInput: RunPanel._on_awaiting_input,
    ev.LogMessage: RunPanel._on_log,
    ev.RunWarning: RunPanel._on_warning,
    ev.RunError: RunPanel._on_error,
    ev.StepFinished: RunPanel._on_step_finished,
    ev.RunFinished: RunPanel._on_run_finished,
}
