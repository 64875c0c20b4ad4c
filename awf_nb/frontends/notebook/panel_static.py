"""A run panel as static HTML, for readers without a kernel.

Widgets need a live kernel (or saved widget state) to be drawn. When a run ends, the panel's
output in the notebook is updated to carry this static rendering as well (`text/html` next
to the widget view), so the saved notebook shows the whole run — steps, command output,
conversation bubbles, errors, summary — on GitHub, in nbviewer and in
`jupyter nbconvert --to html`. JupyterLab with a kernel keeps drawing the widget.

The rendering walks the panel's widget tree: what the panel showed is what is saved;
buttons and the text box are left out.
"""

from __future__ import annotations

from html import escape

import ipywidgets as widgets

from awf_nb.frontends.notebook.panel_items import PANEL_CSS
from awf_nb.frontends.notebook.stream_view import StreamHTML

__all__ = ["static_html"]

_SKIPPED = (widgets.Button, widgets.ToggleButton, widgets.Textarea, widgets.Output)


def static_html(root: widgets.Widget) -> str:
    """`root` (a panel's widget) as one self-contained piece of HTML."""
    return PANEL_CSS + _render(root)


def _render(widget: widgets.Widget) -> str:
    classes = " ".join(getattr(widget, "_dom_classes", ()))
    if isinstance(widget, _SKIPPED) or _hidden(widget):
        return ""
    if isinstance(widget, StreamHTML):
        inner = widget.value or widget.html
        if widget.tag == "pre":
            inner = f"<pre>{inner}</pre>"
        return f'<div class="{classes}"><div class="widget-html-content">{inner}</div></div>'
    if isinstance(widget, widgets.HTML):
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
