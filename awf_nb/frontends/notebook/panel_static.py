"""A run panel as static HTML and as plain text, for readers without a kernel.

Widgets need a live kernel (or saved widget state plus widget JavaScript from the web) to be
drawn. An exporter that finds a widget view and its saved state in a notebook draws the
widget, not the HTML next to it: offline, and on sites that do not run widget JavaScript,
the panel is blank. So when a run ends, its widget view leaves the cell's output and this
rendering takes its place (`RunPanel._save_static`): `text/html` (the steps, command output,
the conversation, errors, the summary, styled by the panel's own CSS, nothing fetched) and
`text/plain` (the same as a transcript, for text-only viewers and output comparisons). So
GitHub, nbviewer, `jupyter nbconvert --to html` opened offline and JupyterLab itself show
the whole run.

Both walk the panel's widget tree: what the panel showed is what is saved; buttons, the
text box and the live diagram are left out.
"""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser
from typing import Any

import ipywidgets as widgets

from awf_nb.frontends.notebook.panel_items import PANEL_CSS
from awf_nb.frontends.notebook.status_view import StatusLine
from awf_nb.frontends.notebook.stream_view import StreamHTML

__all__ = ["LIVE_TEXT", "replace_live_output", "show_live", "static_html", "static_text"]

# A live widget's text form in the cell's output: empty, so that what it leaves when the
# static copy takes its place (`replace_live_output`) is the same for every output checker.
LIVE_TEXT = {"text/plain": ""}

_SKIPPED = (widgets.Button, widgets.ToggleButton, widgets.Textarea, widgets.Output)


def show_live(widget: widgets.Widget) -> Any:
    """Display `widget` in the cell's output; returns the display handle."""
    from IPython.display import display

    return display({**widget._repr_mimebundle_(), **LIVE_TEXT}, raw=True, display_id=True)


def replace_live_output(handle: Any, bundle: dict[str, str], *, in_place: bool) -> None:
    """Put `bundle` (the static copy) in the cell's output in place of the live widget.

    While the cell still runs (it awaits its run) the copy is a new output and the live one
    is emptied to its bare `LIVE_TEXT`: an output that a display update rewrote in place is
    not seen by output checkers that ignore updates (nbval), and `LIVE_TEXT` is what they
    recorded for it. A cell that has returned (a background run) gets no new output: there
    the live output itself is replaced (`in_place`)."""
    from IPython.display import display

    if in_place:
        handle.update(bundle, raw=True)
    else:
        handle.update(LIVE_TEXT, raw=True)
        display(bundle, raw=True)


def static_html(root: widgets.Widget, *, css: bool = True) -> str:
    """`root` (a panel's widget) as one self-contained piece of HTML (`css`: with the
    panel's stylesheet; leave it out of a panel inside another)."""
    return (PANEL_CSS if css else "") + _render(root)


def _render(widget: widgets.Widget) -> str:
    classes = " ".join(getattr(widget, "_dom_classes", ()))
    if isinstance(widget, _SKIPPED) or _hidden(widget):
        return ""
    own = getattr(widget, "static_html", None)  # a widget of ours that knows how (a table)
    if callable(own):
        return str(own())
    if isinstance(widget, StreamHTML):
        # The same structure as the live view (stream_view.js), so the same CSS applies.
        inner = widget.value or widget.html
        tag = "pre" if widget.tag == "pre" else "div"
        return f'<div class="{classes}"><{tag} class="awf-stream">{inner}</{tag}></div>'
    if isinstance(widget, widgets.HTML | StatusLine):
        content = f'<div class="widget-html-content">{widget.value}</div>'
        return f'<div class="widget-html {classes}">{content}</div>'
    if isinstance(widget, widgets.Accordion):
        titles = widget.titles
        parts = []
        for index, child in enumerate(widget.children):
            title = escape(titles[index] if index < len(titles) and titles[index] else "")
            parts.append(f"<details open><summary>{title}</summary>{_render(child)}</details>")
        return f'<div class="{classes}">{"".join(parts)}</div>'
    if isinstance(widget, widgets.Box):
        inner = "".join(_render(child) for child in widget.children)
        return f'<div class="{classes}">{inner}</div>' if inner else ""
    return ""


def _hidden(widget: widgets.Widget) -> bool:
    layout = getattr(widget, "layout", None)
    return getattr(layout, "display", None) == "none"


# --- plain text ------------------------------------------------------------------------------


def static_text(root: widgets.Widget) -> str:
    """`root` as plain text: the status line, each step (its title, then what it showed,
    indented: `prompt: …` for the step's prompt, `you: …` for the person's messages,
    `NAME: …` for a labelled speaker), the summary."""
    lines: list[str] = []
    _text(root, lines, indent="", label=[])
    return "\n".join(lines).strip("\n") + "\n"


def _text(widget: widgets.Widget, lines: list[str], indent: str, label: list[str]) -> None:
    if isinstance(widget, _SKIPPED) or _hidden(widget):
        return
    classes = set(getattr(widget, "_dom_classes", ()))
    if isinstance(widget, StreamHTML | widgets.HTML | StatusLine):
        value = widget.value or (widget.html if isinstance(widget, StreamHTML) else "")
        if "awf-speaker" in classes:  # a name above the bubble that follows
            label[:] = [html_to_text(value).strip()]
            return
        text = html_to_text(value).strip("\n")
        if not text.strip():
            return
        prefix = ""
        if label:
            prefix = f"{label.pop()}: "
        elif "awf-prompt" in classes:
            prefix = "prompt: "
        elif "awf-user" in classes:
            prefix = "you: "
        first, *rest = text.split("\n")
        pad = " " * len(prefix)
        lines.append(indent + prefix + first)
        lines.extend(indent + pad + line if line else "" for line in rest)
        return
    if isinstance(widget, widgets.Accordion):
        for index, child in enumerate(widget.children):
            title = widget.titles[index] if index < len(widget.titles) else ""
            lines.append(indent + (title or ""))
            _text(child, lines, indent + "  ", label)
        return
    if isinstance(widget, widgets.Box):
        for child in widget.children:
            _text(child, lines, indent, label)


_BLOCKS = frozenset(
    {"p", "div", "br", "li", "pre", "tr", "table", "ul", "ol", "details", "summary",
     "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr"}
)  # fmt: skip


class _TextOf(HTMLParser):
    """The text an HTML fragment shows, block elements on lines of their own."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0  # inside <style> / <script>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
        elif tag in _BLOCKS:
            self._break()
        elif tag == "td" and self.parts and not self.parts[-1].endswith("\n"):
            self.parts.append("  ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCKS:
            self._break()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)

    def _break(self) -> None:
        if self.parts and not self.parts[-1].endswith("\n"):
            self.parts.append("\n")


def html_to_text(fragment: str) -> str:
    """The visible text of an HTML fragment of the panel (no tags, entities decoded)."""
    parser = _TextOf()
    parser.feed(fragment)
    parser.close()
    text = "".join(parser.parts)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")
