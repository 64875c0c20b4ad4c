"""Driving the run panel's ipywidgets as the browser would, without a browser: the comm
messages a click or a typed text sends, and a search through a widget tree."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

# What the browser sends when a button is clicked.
CLICK = {"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []}


def click(button: widgets.Button) -> None:
    """What the browser sends when `button` is clicked."""
    button._handle_msg(CLICK)


def type_into(box: widgets.Textarea, text: str) -> None:
    """What the browser sends when the text box changes."""
    box._handle_msg(
        {
            "content": {"data": {"method": "update", "state": {"value": text}, "buffer_paths": []}},
            "buffers": [],
        }
    )


def find(widget: widgets.Widget, kind: type) -> list[Any]:
    """Every widget of type `kind` in the tree under `widget` (itself included), depth first."""
    found = [widget] if isinstance(widget, kind) else []
    for child in getattr(widget, "children", ()):
        found.extend(find(child, kind))
    return found


def press(composer: Any, action: str, text: str | None = None) -> None:
    """What the panel's composer (composer.js) sends: one message, the action and the text."""
    content: dict[str, Any] = {"action": action}
    if text is not None:
        content["text"] = text
    composer._handle_msg(
        {"content": {"data": {"method": "custom", "content": content}}, "buffers": []}
    )


def send(controls: Any, text: str) -> None:
    """Type `text` into a panel's text box and click Send (`controls`: `RunPanel.input`)."""
    press(controls.composer, "send", text)
