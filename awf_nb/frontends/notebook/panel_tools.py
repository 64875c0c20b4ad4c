"""Tool calls in the run panel (chat mode: an agent step with `tools:`): one collapsible
block per call, and the Allow / Deny buttons of a call that needs the person's approval.

A block is one `widgets.HTML` holding `<details><summary>⚙ name(args) → result · 0.1 s
</summary>arguments and result</details>`, so the saved static HTML (panel_static.py) shows
it as it was, collapsible too. Its value is sent when the call starts, when it waits for an
answer, and when it ends: never per token, so it needs no flushing of its own.
Everything in it (the tool's name, the model's arguments, the tool's result) is escaped.

While the call waits for an answer, the block's box also holds a row with Allow and Deny;
the row goes once the person answers or the call ends (Stop, the run cancelled).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal

import ipywidgets as widgets

from awf_nb.engine import events as ev
from awf_nb.engine.summary import format_duration
from awf_nb.frontends.notebook.panel_items import HtmlMaker, clean_output
from awf_nb.frontends.notebook.summary import esc
from awf_nb.frontends.tool_calls import shorten_arguments, shorten_result

SUMMARY_ARGUMENT_CHARS = 100  # a panel is wider than the terminal's one line
RESULT_CHARS = 4_000  # of a result, in the open block (tools cap their output already)
ARGUMENTS_CHARS = 4_000  # of the arguments, in the open block

State = Literal["running", "asking", "allowed", "denied", "finished", "stopped"]


class ToolBlock:
    """One tool call: its block in a step's section, and the Allow / Deny row while it waits
    for an answer. `widget` is what goes in the section."""

    def __init__(self, maker: HtmlMaker, call_id: str, name: str, arguments: str, speaker: str):
        self.call_id = call_id
        self.name = name
        self.arguments = arguments
        self.speaker = speaker
        self.state: State = "running"
        self.html = maker.html("", "awf-tool-block")
        self.row: widgets.HBox | None = None
        self.allow_button: widgets.Button | None = None
        self.deny_button: widgets.Button | None = None
        # A box of its own, so the row comes and goes under the block without touching the
        # section's other children.
        self.widget = widgets.VBox(
            [self.html], layout=maker.shared_layout, _dom_classes=("awf-tool-call",)
        )
        self._show("running…")

    # --- what happens to the call ------------------------------------------------------------

    def ask(self, on_answer: Callable[[bool], None] | None, *, asking_you: bool) -> None:
        """The call waits for an answer. `on_answer` (the buttons' action; None for no
        buttons: someone else answers, e.g. `--reply`) is called with True for Allow."""
        self.state = "asking"
        self._show("waiting for your answer" if asking_you else "waiting for an answer")
        if on_answer is None:
            return
        self.allow_button = widgets.Button(
            description="Allow", button_style="success", _dom_classes=("awf-allow",)
        )
        self.deny_button = widgets.Button(
            description="Deny", button_style="danger", _dom_classes=("awf-deny",)
        )
        self.allow_button.on_click(lambda _: on_answer(True))
        self.deny_button.on_click(lambda _: on_answer(False))
        question = widgets.HTML(
            f"Allow <code>{esc(self.name)}</code> to run?", _dom_classes=("awf-confirm-question",)
        )
        self.row = widgets.HBox(
            [question, self.allow_button, self.deny_button], _dom_classes=("awf-confirm",)
        )
        self.widget.children = (self.html, self.row)

    def answered(self, allowed: bool) -> None:
        """The person clicked: the buttons go, the block says what they chose."""
        self.state = "allowed" if allowed else "denied"
        self._drop_row()
        self._show("allowed · running…" if allowed else "denied")

    def finish(self, event: ev.ToolCallFinished) -> None:
        self.state = "finished"
        self._drop_row()
        took = format_duration(event.duration)
        if event.outcome == "refused":
            summary = '<span class="awf-tool-refused">refused</span>'
        elif event.outcome == "interrupted":
            summary = '<span class="awf-tool-refused">interrupted</span>'
            if event.duration:  # a call cut short may come with no duration
                summary += f" · {took}"
        elif event.is_error:
            error = esc(shorten_result(clean_output(event.result)))
            summary = f'<span class="awf-tool-error">error: {error}</span> · {took}'
        else:
            summary = f"{esc(shorten_result(clean_output(event.result)))} · {took}"
        self._show(summary, result=event.result, is_error=event.is_error, outcome=event.outcome)

    def stop(self) -> None:
        """The step or run ended with the call unfinished (no result will come)."""
        if self.state == "finished":
            return
        self.state = "stopped"
        self._drop_row()
        self._show('<span class="awf-tool-refused">stopped</span>')

    @property
    def open(self) -> bool:
        return self.state != "finished" and self.state != "stopped"

    # --- drawing ----------------------------------------------------------------------------------

    def _drop_row(self) -> None:
        if self.row is None:
            return
        row, self.row = self.row, None
        self.widget.children = (self.html,)
        for button in (self.allow_button, self.deny_button):
            if button is not None:
                button.close()
        self.allow_button = self.deny_button = None
        for child in row.children:
            child.close()
        row.close()

    def _show(
        self,
        summary: str,
        *,
        result: str | None = None,
        is_error: bool = False,
        outcome: str = "",
    ) -> None:
        """The block's HTML: `summary` is HTML already; the rest is escaped here."""
        who = f'<span class="awf-tool-speaker">{esc(self.speaker)}:</span> ' if self.speaker else ""
        shown = shorten_arguments(self.arguments, SUMMARY_ARGUMENT_CHARS)
        call = f"⚙ {who}<b>{esc(self.name)}</b>({esc(shown)})"
        body = ""
        if self.arguments.strip() and shown:
            body += '<div class="awf-tool-label">arguments</div>'
            body += f"<pre>{esc(_cap(_pretty(self.arguments), ARGUMENTS_CHARS))}</pre>"
        if result is not None:
            label = "error" if is_error else (outcome or "result")
            text = clean_output(result) if result.strip() else "(no output)"
            classes = ' class="awf-tool-error"' if is_error else ""
            body += f'<div class="awf-tool-label">{label}</div>'
            body += f"<pre{classes}>{esc(_cap(text, RESULT_CHARS))}</pre>"
        self.html.value = f"<details><summary>{call} → {summary}</summary>{body}</details>"


def _pretty(arguments: str) -> str:
    """JSON arguments indented for reading; text that is not JSON as it came."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except ValueError:
        return arguments


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"
