"""The end-of-run summary as HTML and text: shown in the panel and by a `RunHandle`.

Pure string building (no widgets), so a handle can render itself in any frontend, and the
panel (which only sees events) and the handle (which holds the final `RunState`) show the
same thing.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

STATUS_MARKS = {"completed": "✓", "failed": "✗", "cancelled": "■", "skipped": "–"}
STATUS_COLORS = {
    "completed": "var(--jp-success-color1, #2e7d32)",
    "failed": "var(--jp-error-color1, #c62828)",
    "cancelled": "var(--jp-warn-color1, #b26a00)",
}


@dataclass
class StepLine:
    """One executed step as the summary lists it."""

    name: str
    status: str
    duration: float
    tokens: int = 0


@dataclass
class Summary:
    workflow: str
    status: str
    duration: float
    tokens: int = 0
    run_id: str = ""
    error: str = ""
    message: str = ""
    steps: list[StepLine] = field(default_factory=list)

    def headline(self) -> str:
        parts = [f"{self.status} in {format_duration(self.duration)}"]
        parts.append(f"{len(self.steps)} step{'s' if len(self.steps) != 1 else ''}")
        if self.tokens:
            parts.append(f"{self.tokens} tokens")
        return " · ".join(parts)

    def resume_hint(self) -> str:
        if self.status in ("failed", "cancelled") and self.run_id:
            return f"continue it with %awf resume {self.run_id}"
        return ""

    def to_text(self) -> str:
        lines = [
            f"{self.workflow}: {self.headline()}" + (f" (run {self.run_id})" if self.run_id else "")
        ]
        if self.message:
            lines.append(self.message)
        if self.error:
            lines.append(f"error: {self.error}")
        lines.extend(
            f"  {STATUS_MARKS.get(s.status, '·')} {s.name:<20} {s.status:<9} "
            f"{format_duration(s.duration):>8}" + (f"  {s.tokens} tokens" if s.tokens else "")
            for s in self.steps
        )
        if hint := self.resume_hint():
            lines.append(hint)
        return "\n".join(lines)

    def to_html(self) -> str:
        color = STATUS_COLORS.get(self.status, "inherit")
        run = f' <span class="awf-note">run {esc(self.run_id)}</span>' if self.run_id else ""
        parts = [
            f'<div><b>{esc(self.workflow)}</b>: <b style="color:{color}">{esc(self.status)}</b>'
            f"{esc(self.headline().removeprefix(self.status))}{run}</div>"
        ]
        if self.message:
            parts.append(f'<div class="awf-message">{esc(self.message)}</div>')
        if self.error:
            parts.append(f'<div class="awf-error-text">{esc(self.error)}</div>')
        if self.steps:
            rows = "".join(
                f"<tr><td>{STATUS_MARKS.get(s.status, '·')}</td><td>{esc(s.name)}</td>"
                f"<td>{esc(s.status)}</td><td>{format_duration(s.duration)}</td>"
                f"<td>{f'{s.tokens} tokens' if s.tokens else ''}</td></tr>"
                for s in self.steps
            )
            parts.append(f'<table class="awf-steps-table">{rows}</table>')
        if hint := self.resume_hint():
            parts.append(f'<div class="awf-note">{esc(hint)}</div>')
        return "".join(parts)


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def format_duration(seconds: float) -> str:
    """`0.42 s`, `12.3 s`, `2 min 05 s`, `1 h 02 min`."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def format_elapsed(seconds: float) -> str:
    """Whole seconds, for a status line that ticks once a second."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    return format_duration(whole)
