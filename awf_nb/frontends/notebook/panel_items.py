"""What a run panel is made of, below the panel itself: one section per step execution, one
widget per assistant reply, a command's output in bounded chunks, and the HTML helpers.

Each streamed item (`Reply`, `Output`) only buffers its text; the panel decides when to
`flush` it (see panel.py), and a flush sends only what the browser does not have yet
(`StreamHTML`: finished blocks or lines once, the open one as a diff).
Model output is untrusted: Markdown is rendered with raw HTML escaped and remote images
as links (markdown_html.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Protocol

import ipywidgets as widgets

from awf_nb.engine import events as ev
from awf_nb.engine.summary import STATUS_MARKS, format_duration, format_tokens
from awf_nb.frontends.notebook.markdown_html import render_markdown
from awf_nb.frontends.notebook.markdown_stream import BlockCutter
from awf_nb.frontends.notebook.stream_view import StreamHTML
from awf_nb.frontends.notebook.summary import esc
from awf_nb.safe_text import mark_bidi

OUTPUT_CHUNK_CHARS = 8_000  # a command's output is split into widgets of this size…
MAX_OUTPUT_CHUNKS = 32  # …and only the newest ones are kept in the panel


def _asset(name: str) -> str:
    return (files("awf_nb.frontends.notebook") / name).read_text(encoding="utf-8")


# The panel's stylesheet and its browser-side script are files of the package, so they
# can be read and linted as CSS and JavaScript (panel.css, panel.js).
PANEL_CSS = "<style>\n" + _asset("panel.css") + "</style>"
# Focus at the first prompt, the text box kept in view (see the comment at the top of panel.js).
ENTER_TO_SEND_JS = _asset("panel.js")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


def clean_output(text: str) -> str:
    """Terminal output for an HTML <pre>: no ANSI escapes, `\\r` progress lines collapsed."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return text


def earlier_html(event: ev.ConversationResumed, agent: str) -> str:
    """A resumed conversation so far, as bubbles (the live ones' classes) under a summary
    line that folds them away."""
    bubbles = []
    for said in event.earlier:
        if said.role == "agent":
            text = render_markdown(said.text)
            if said.interrupted:
                text += '<p class="awf-note">■ reply interrupted</p>'
            elif said.cut:
                text += f'<p class="awf-note awf-cut">{CUT_MARK}</p>'
            kind, label = "awf-assistant", ""
        else:
            text = esc(said.text)
            kind = {"partner": "awf-partner", "prompt": "awf-user awf-prompt"}.get(
                said.role, "awf-user"
            )
            label = said.name if said.role == "partner" else ""
        if label:
            bubbles.append(
                f'<div class="awf-speaker"><div class="widget-html-content">{esc(label)}'
                "</div></div>"
            )
        inner = "awf-stream" if said.role == "agent" else "widget-html-content"
        bubbles.append(f'<div class="{kind}"><div class="{inner}">{text}</div></div>')
    count = len(event.earlier) + event.left_out
    more = f" ({event.left_out} earlier ones not shown)" if event.left_out else ""
    summary = f"Earlier in this conversation: {count} messages{more}"
    return (
        f"<details open><summary>{esc(summary)}</summary>"
        f'<div class="awf-earlier-body">{"".join(bubbles)}</div></details>'
    )


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


_WAITING = '<p class="awf-note">…</p>'
CUT_MARK = "… cut at max_tokens"  # after a reply that reached its length limit


class Reply:
    """One assistant reply: one `StreamHTML` widget. Each flush renders only what changed:
    finished Markdown blocks are rendered once and appended, the open block is re-rendered
    and sent as a diff; `finish` renders the whole reply once."""

    def __init__(self, widget: StreamHTML) -> None:
        self.widget = widget
        self.label: widgets.HTML | None = None  # a partner's name above the bubble
        self.parts: list[str] = []
        self.finished = False
        self._text = ""
        self._cutter = BlockCutter()
        self._rendered_upto = 0  # the source text rendered into the sealed part

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def flush(self) -> bool:
        text = self.text
        cut = self._cutter.cut(text)
        append = ""
        if cut > self._rendered_upto:
            append = render_markdown(text[self._rendered_upto : cut])
            self._rendered_upto = cut
        rest = text[self._rendered_upto :]
        tail = render_markdown(rest) if rest.strip() else ("" if text else _WAITING)
        return self.widget.push(append, tail)

    def finish(self, text: str, interrupted: bool, cut: bool = False) -> None:
        """The final reply; `cut`: it reached max_tokens, so it may end mid-word."""
        if text:
            self.parts = [text]
        self.finished = True
        value = render_markdown(self.text) if self.text else ""
        if interrupted:
            value += '<p class="awf-note">■ reply interrupted</p>'
        elif cut:
            value += f'<p class="awf-note awf-cut">{CUT_MARK}</p>'
        if not value:
            value = '<p class="awf-note">(empty reply)</p>'
        self.widget.finish(value)


class Output:
    """A command's output: `StreamHTML` `<pre>` widgets of about OUTPUT_CHUNK_CHARS each.
    Complete lines are appended once; the line still being written is the tail. Only the
    newest MAX_OUTPUT_CHUNKS widgets are kept."""

    def __init__(self, section: Section) -> None:
        self.section = section
        self.chunks: list[StreamHTML] = []
        self.pending: list[tuple[str, str]] = []  # (stream, text) not flushed yet
        self.line: list[tuple[str, str]] = []  # the line being written: (stream, text)
        self.chunk_chars = 0
        self.dropped = 0

    def append(self, text: str, stream: str) -> None:
        if self.pending and self.pending[-1][0] == stream:
            self.pending[-1] = (stream, self.pending[-1][1] + text)
        else:
            self.pending.append((stream, text))

    def flush(self) -> bool:
        if not self.chunks:
            self._new_chunk()
        done: list[tuple[str, str]] = []
        for stream, text in self.pending:
            if self.line and self.line[-1][0] == stream:
                text = self.line.pop()[1] + text
            *complete, partial = text.split("\n")
            if complete:
                done.extend(self.line)
                done.append((stream, "\n".join(complete) + "\n"))
                self.line = []
            if partial:
                self.line.append((stream, partial))
        self.pending = []
        append = "".join(_pre_piece(stream, text) for stream, text in done)
        tail = "".join(_pre_piece(stream, text) for stream, text in self.line)
        changed = self.chunks[-1].push(append, tail)
        self.chunk_chars += sum(len(text) for _, text in done)
        if self.chunk_chars >= OUTPUT_CHUNK_CHARS:
            self._roll()
        return changed

    def close(self) -> None:
        """The step ended: the last widget keeps its whole text as its value."""
        if self.pending:
            self.flush()
        if self.chunks:
            self.chunks[-1].finish(self.chunks[-1].html)

    def _new_chunk(self) -> None:
        self.chunks.append(self.section.add_stream("awf-output", tag="pre"))
        self.chunk_chars = 0

    def _roll(self) -> None:
        last = self.chunks[-1]
        carried, last.tail = last.tail, ""
        last.finish(last.sealed)
        self._new_chunk()
        if carried:
            self.chunks[-1].push("", carried)
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
        # Titles are plain text (the widget escapes them): only the bidi controls to show.
        self.name = mark_bidi(event.step)
        self.step_name = event.step
        # The conversation's bubbles in the order shown (a message's text, or a reply), and
        # how many messages came before them (a resumed conversation's): "Branch from
        # here" numbers a message by them (panel_branch.py).
        self.bubbles: list[str | Reply] = []
        self.earlier_messages = 0
        self.reply: Reply | None = None
        # Tool calls came in the current turn: its text is split around their blocks.
        self.tools_in_turn = False
        self.empty_reply: Reply | None = None  # the last reply, when it said nothing
        self.output: Output | None = None
        # The other agent when the step's agent talks with one (`conversation.with`, a
        # simulated user): then every bubble is labelled with who says it.
        self.partner = ""
        self._output_note: widgets.HTML | None = None
        what = event.kind if event.mode in ("", "single") else f"{event.kind}, {event.mode}"
        self.what = mark_bidi(f"{what}, {event.detail}" if event.detail else what)
        self.body = widgets.VBox(layout=maker.shared_layout, _dom_classes=("awf-step-body",))
        self.widget = widgets.Accordion(
            children=[self.body],
            titles=(f"● {self.name} · {self.what}",),
            selected_index=0,
            layout=maker.shared_layout,
            _dom_classes=("awf-step",),
        )

    def add_html(self, value: str, *css_classes: str) -> widgets.HTML:
        item = self.maker.html(value, *css_classes)
        self.body.children = (*self.body.children, item)
        return item

    def remove(self, item: widgets.Widget) -> None:
        self.body.children = tuple(c for c in self.body.children if c is not item)

    def set_output_note(self, text: str) -> None:
        if self._output_note is None:
            self._output_note = self.maker.html("", "awf-log")
            self.body.children = (self._output_note, *self.body.children)
        self._output_note.value = esc(text)

    def add_stream(self, css_class: str, *, tag: str = "div", tail: str = "") -> StreamHTML:
        item = StreamHTML(
            tag=tag, tail=tail, layout=self.maker.shared_layout, _dom_classes=(css_class,)
        )
        self.body.children = (*self.body.children, item)
        return item

    def new_reply(self, speaker: str = "") -> Reply:
        """A bubble for the step's agent, or (`speaker`) for a partner agent: on the
        person's side, in its own colour, under its name. In an exchange between agents
        the step's agent is named too (by its step)."""
        if speaker:
            label: widgets.HTML | None = self.add_html(esc(speaker), "awf-speaker")
        elif self.partner:
            label = self.add_html(self.own_label(), "awf-speaker", "awf-own")
        else:
            label = None
        self.reply = Reply(
            self.add_stream("awf-partner" if speaker else "awf-assistant", tail=_WAITING)
        )
        self.reply.label = label
        self.bubbles.append(self.reply)
        return self.reply

    def own_label(self) -> str:
        return esc(self.name)

    def met_partner(self, partner: str) -> None:
        """The step's agent turns out to talk with `partner` (a simulated user, a partner
        not known from the workflow): the bubbles so far get their labels too (the step's
        agent; the person, who may have stepped in)."""
        if self.partner:
            return
        self.partner = partner
        children: list[widgets.Widget] = []
        for child in self.body.children:
            classes = child._dom_classes
            labelled = children and "awf-speaker" in children[-1]._dom_classes
            if "awf-assistant" in classes and not labelled:
                children.append(self.maker.html(self.own_label(), "awf-speaker", "awf-own"))
            elif "awf-user" in classes and "awf-prompt" not in classes and not labelled:
                children.append(self.maker.html("you", "awf-speaker"))
            children.append(child)
        self.body.children = tuple(children)

    def drop_reply(self, reply: Reply) -> None:
        """Take away a bubble that never got any text (a reply of tool calls only)."""
        for item in (reply.label, reply.widget):
            if item is not None:
                self.remove(item)
                item.close()
        reply.finished = True
        self.bubbles = [b for b in self.bubbles if b is not reply]
        if self.reply is reply:
            self.reply = None

    def finish(self, event: ev.StepFinished) -> None:
        if self.output is not None:
            self.output.close()
        extra = f" · {format_tokens(event.tokens, event.tokens_estimated)}" if event.tokens else ""
        mark = STATUS_MARKS.get(event.status, "·")
        word = "" if event.status == "completed" else f" · {event.status}"
        self.widget.set_title(
            0, f"{mark} {self.name} · {self.what} · {format_duration(event.duration)}{extra}{word}"
        )
