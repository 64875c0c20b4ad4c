"""The end-of-run summary (`engine.summary.RunSummary`) as HTML, for the panel and a
`RunHandle`; in a notebook a failed or cancelled run is continued with `%awf resume`."""

from __future__ import annotations

import html

from awf_nb.engine.summary import RunSummary, format_duration, format_tokens
from awf_nb.safe_text import mark_bidi

RESUME_COMMAND = "%awf resume"
STATUS_COLORS = {
    "completed": "var(--jp-success-color1, #2e7d32)",
    "failed": "var(--jp-error-color1, #c62828)",
    "cancelled": "var(--jp-warn-color1, #b26a00)",
}


def summary_html(summary: RunSummary) -> str:
    """The headline, the message or error, a table of steps and how to continue."""
    color = STATUS_COLORS.get(summary.status, "inherit")
    parts = [
        f"<div><b>{esc(summary.workflow)}</b>: "
        f'<b style="color:{color}">{esc(summary.status)}</b> {esc(summary.figures())} '
        f'<span class="awf-note">run {esc(summary.run_id)}</span></div>'
    ]
    if summary.message:
        parts.append(f'<div class="awf-message">{esc(summary.message)}</div>')
    if summary.error:
        parts.append(f'<div class="awf-error-text">{esc(summary.error)}</div>')
    if summary.steps:
        rows = "".join(
            f"<tr><td>{s.mark}</td><td>{esc(s.name)}</td><td>{esc(s.status)}</td>"
            f"<td>{format_duration(s.duration)}</td>"
            f"<td>{format_tokens(s.tokens, s.tokens_estimated) if s.tokens else ''}</td></tr>"
            for s in summary.steps
        )
        parts.append(f'<table class="awf-steps-table">{rows}</table>')
    if hint := summary.resume_hint(RESUME_COMMAND):
        parts.append(f'<div class="awf-note">{esc(hint)}</div>')
    return "".join(parts)


def summary_text(summary: RunSummary) -> str:
    return summary.to_text(RESUME_COMMAND)


def esc(text: str) -> str:
    """Text for HTML: escaped, and its bidirectional-text controls shown (`mark_bidi`), so
    they cannot reorder what the panel shows (model and tool text is untrusted)."""
    return html.escape(mark_bidi(text), quote=True)
