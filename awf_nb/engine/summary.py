"""The end-of-run summary: one `RunSummary`, built from the run's state, shown everywhere.

The engine builds it when a run ends and sends it in the `RunFinished` event; the terminal,
the notebook panel, a `RunHandle` and `RunResult.summary()` all render this same value
(as text here, as HTML in `frontends/notebook/summary.py`), so they cannot disagree on what
a run did. Durations, token figures and marks are formatted here for the same reason:
`format_duration` and `format_tokens` are the one way every frontend, `awf status` and
`awf history` show a time or a number of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState

STATUS_MARKS = {"completed": "✓", "failed": "✗", "cancelled": "■", "skipped": "–"}


@dataclass(frozen=True, slots=True)
class StepLine:
    """One executed step, as the summary lists it."""

    name: str
    status: str
    duration: float
    tokens: int = 0
    tokens_estimated: bool = False

    @property
    def mark(self) -> str:
        return STATUS_MARKS.get(self.status, "·")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a run did: its outcome, and each executed step once, in the order they ran."""

    workflow: str
    run_id: str
    status: str  # completed | failed | cancelled (a run that ended)
    duration: float  # the time spent running, summed over resumes (`RunState.duration`)
    tokens: int = 0
    tokens_estimated: bool = False  # some of them are the len/4 estimate
    error: str = ""
    message: str = ""  # the terminal step's message
    steps: tuple[StepLine, ...] = ()

    @classmethod
    def from_state(cls, state: RunState) -> RunSummary:
        steps = tuple(
            StepLine(name, step.status, step.duration, step.tokens_used, step.tokens_estimated)
            for name, step in ((n, state.steps[n]) for n in dict.fromkeys(state.executed))
        )
        return cls(
            workflow=state.workflow_name,
            run_id=state.run_id,
            status=state.status,
            duration=state.duration,
            tokens=state.total_tokens,
            tokens_estimated=state.tokens_estimated,
            error=state.error,
            message=state.message,
            steps=steps,
        )

    @property
    def mark(self) -> str:
        return STATUS_MARKS.get(self.status, "·")

    def figures(self) -> str:
        """`in 1.23 s · 2 steps · 340 tokens` (`after …` for a run that did not complete)."""
        word = "in" if self.status == "completed" else "after"
        parts = [f"{word} {format_duration(self.duration)}"]
        parts.append(f"{len(self.steps)} step{'s' if len(self.steps) != 1 else ''}")
        if self.tokens:
            parts.append(format_tokens(self.tokens, self.tokens_estimated))
        return " · ".join(parts)

    def resume_hint(self, resume_command: str = "awf resume") -> str:
        """How to continue a run that failed or was cancelled ("" for one that completed)."""
        if self.status in ("failed", "cancelled") and self.run_id:
            return f"continue it with {resume_command} {self.run_id}"
        return ""

    def to_text(self, resume_command: str = "awf resume") -> str:
        """The summary as plain text; names and messages may hold what a model or a command
        wrote, so nothing in it acts on a terminal (or a notebook's text output)."""
        from awf_nb.safe_text import terminal_safe as safe

        lines = [f"{safe(self.workflow)}: {self.status} {self.figures()} (run {self.run_id})"]
        if self.message:
            lines.append(safe(self.message))
        if self.error:
            lines.append(f"error: {safe(self.error)}")
        lines.extend(
            f"  {s.mark} {safe(s.name):<20} {s.status:<9} {format_duration(s.duration):>8}"
            + (f"  {format_tokens(s.tokens, s.tokens_estimated)}" if s.tokens else "")
            for s in self.steps
        )
        if hint := self.resume_hint(resume_command):
            lines.append(hint)
        return "\n".join(lines)


def format_duration(seconds: float, *, whole: bool = False) -> str:
    """A time as every part of awf shows it: `0.42 s`, `12.3 s`, `2 min 05 s`, `1 h 02 min`.

    `whole`: in whole seconds (`7 s`), for a status line that ticks once a second."""
    seconds = max(seconds, 0.0)
    if whole:
        seconds = float(int(seconds))
        if seconds < 60:
            return f"{int(seconds)} s"
    if round(seconds, 2) < 10:
        return f"{seconds:.2f} s"
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds) if whole else round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def format_limit(seconds: float | None) -> str:
    """A time limit in a "timed out after …" message. `None` (no limit) cannot have been
    reached, but a message about it must still be readable rather than fail."""
    return "no limit" if seconds is None else format_duration(seconds)


def format_elapsed(seconds: float) -> str:
    """Whole seconds, for a status line that ticks once a second."""
    return format_duration(seconds, whole=True)


def format_tokens(count: int, estimated: bool = False) -> str:
    """`340 tokens`, or `~340 tokens` when some of them are the len/4 estimate."""
    return f"{'~' if estimated else ''}{count} tokens"
