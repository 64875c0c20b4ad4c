"""What a run panel is made of, below the panel itself: one section per step execution, one
widget per assistant reply, a command's output in bounded chunks, and the HTML helpers.

Each streamed item (`Reply`, `Output`) only buffers its text; the panel decides when to
`flush` it (see panel.py), and a flush sends a widget's value only when it changed.
Model output is untrusted: Markdown is rendered with raw HTML escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Protocol

import ipywidgets as widgets
from markdown_it import MarkdownIt

from awf_nb.engine import events as ev
from awf_nb.engine.summary import STATUS_MARKS, format_duration
from awf_nb.frontends.notebook.summary import esc

OUTPUT_CHUNK_CHARS = 8_000  # a command's output is split into widgets of this size…
MAX_OUTPUT_CHUNKS = 32  # …and only the newest ones are kept in the panel


def _asset(name: str) -> str:
    return (files("awf_nb.frontends.notebook") / name).read_text(encoding="utf-8")


# The panel's stylesheet and its browser-side script are files of the package, so they
# can be read and linted as CSS and JavaScript (panel.css, panel.js).
PANEL_CSS = "<style>\n" + _asset("panel.css") + "</style>"
# Enter sends, Shift+Enter inserts a new line (see the comment at the top of panel.js).
ENTER_TO_SEND_JS = _asset("panel.js")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_markdown = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)


def render_markdown(text: str) -> str:
    """Markdown to HTML with raw HTML escaped (model output is untrusted)."""
    return _markdown.render(text)


def clean_output(text: str) -> str:
    """Terminal output for an HTML <pre>: no ANSI escapes, `\\r` progress lines collapsed."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return text


def error_html(message: str) -> str:
    """An error message as one HTML paragraph, its line breaks kept."""
    return "<p>" + esc(message).replace("\n", "<br>") + "</p>"


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


class Streamed(Protocol):
    """Something whose text grows by small pieces and is sent at flush time."""

    def flush(self) -> bool:
        """Send the widget's new value if it changed; return whether it did."""
        ...


class HtmlMaker(Protocol):
    """Makes the panel's HTML items (they share one layout and one style)."""

    shared_layout: widgets.Layout

    def html(self, value: str, *css_classes: str) -> widgets.HTML: ...


class Reply:
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


class Output:
    """A command's output: `<pre>` widgets of at most OUTPUT_CHUNK_CHARS; only the last one
    changes, so long outputs are not resent at every flush."""

    def __init__(self, section: Section) -> None:
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


class Section:
    """The collapsible section of one step execution."""

    def __init__(self, maker: HtmlMaker, event: ev.StepStarted) -> None:
        self.maker = maker
        self.name = event.step
        self.reply: Reply | None = None
        self.output: Output | None = None
        self._output_note: widgets.HTML | None = None
        what = event.kind if event.mode in ("", "single") else f"{event.kind}, {event.mode}"
        self.what = f"{what}, {event.detail}" if event.detail else what
        self.body = widgets.VBox(layout=maker.shared_layout, _dom_classes=("awf-step-body",))
        self.widget = widgets.Accordion(
            children=[self.body],
            titles=(f"● {self.name} · {self.what}",),
            selected_index=0,
            layout=maker.shared_layout,
            _dom_classes=("awf-step",),
        )

    def add_html(self, value: str, css_class: str) -> widgets.HTML:
        item = self.maker.html(value, css_class)
        self.body.children = (*self.body.children, item)
        return item

    def remove(self, item: widgets.Widget) -> None:
        self.body.children = tuple(c for c in self.body.children if c is not item)

    def set_output_note(self, text: str) -> None:
        if self._output_note is None:
            self._output_note = self.maker.html("", "awf-log")
            self.body.children = (self._output_note, *self.body.children)
        self._output_note.value = esc(text)

    def new_reply(self) -> Reply:
        self.reply = Reply(self.add_html('<p class="awf-note">…</p>', "awf-assistant"))
        return self.reply

    def finish(self, event: ev.StepFinished) -> None:
        extra = f" · {event.tokens} tokens" if event.tokens else ""
        mark = STATUS_MARKS.get(event.status, "·")
        word = "" if event.status == "completed" else f" · {event.status}"
        self.widget.set_title(
            0, f"{mark} {self.name} · {self.what} · {format_duration(event.duration)}{extra}{word}"
        )
