"""An eval in the terminal: a progress bar (rich), one line per failing run, the summary.

`TerminalEvalProgress` is the `EvalProgress` of `awf eval`: the bar and the failure lines
go to stderr (they are progress), the results table to stdout. `run_eval_in_terminal`
runs an eval on a fresh event loop with Ctrl-C / SIGTERM cancelling the runs in flight:
they are saved as cancelled and the eval can be finished with `awf eval --resume`.
Everything shown comes from masked rows and is stripped of terminal control characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
)
from rich.table import Table
from rich.text import Text

from awf_nb.engine.summary import format_elapsed
from awf_nb.safe_text import terminal_safe

if TYPE_CHECKING:
    from awf_nb.evals.driver import EvalRun
    from awf_nb.evals.results import EvalResult, EvalRow

_STYLES = {"pass": "green", "fail": "red", "error": "grey50"}
ERROR_CHARS = 160
PIPE_WIDTH = 200


class TerminalEvalProgress:
    """The terminal's view of an eval (see the module docstring)."""

    def __init__(self, *, err: TextIO | None = None, out: TextIO | None = None) -> None:
        self.err = console(err or sys.stderr)
        self.out = console(out or sys.stdout)
        self.progress: Progress | None = None
        self.task: Any = None
        self.counts = {"pass": 0, "fail": 0, "error": 0}

    def eval_started(self, run: EvalRun) -> None:
        done = len(run.done)
        self.err.print(
            Text(
                f"eval {run.eval_id}: {terminal_safe(run.manifest.workflow)} × "
                f"{run.manifest.cases} cases × "
                + (f"{len(run.manifest.variants)} variants × " if run.manifest.variants else "")
                + f"{run.manifest.epochs} epochs, {run.executor.describe(run.manifest.concurrency)}"
                + (f" ({done} done before)" if done else "")
            )
        )
        for row in run.done:
            self.counts[row.outcome] += 1
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            ElapsedColumn(),
            RemainingColumn(),
            console=self.err,
            transient=False,
        )
        self.task = self.progress.add_task(
            "runs", total=run.total, completed=done, counts=self._counts()
        )
        self.progress.start()

    def _counts(self) -> str:
        c = self.counts
        return f"✓{c['pass']} ✗{c['fail']} !{c['error']}"

    def run_started(self, case: str, epoch: int, run_id: str, variant: str = "") -> None:
        pass

    def run_finished(self, row: EvalRow) -> None:
        self.counts[row.outcome] += 1
        if self.progress is not None:
            self.progress.update(self.task, advance=1, counts=self._counts())
        if row.passed is not True:
            self.err.print(failure_line(row))

    def eval_finished(self, result: EvalResult) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        if result.status == "cancelled":
            self.err.print(
                Text(
                    f"eval {result.eval_id} cancelled after {len(result.rows)} of {result.total} "
                    f"runs; finish it with: awf eval --resume {result.eval_id}",
                    style="yellow",
                )
            )
        print_summary(result, self.out)


class ElapsedColumn(ProgressColumn):
    """The time the eval has run, in awf's one format (`1 min 31 s elapsed`)."""

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text(f"{format_elapsed(elapsed or 0.0)} elapsed", style="progress.elapsed")


class RemainingColumn(ProgressColumn):
    """The time left at the pace so far (`ETA 4 min 34 s`); nothing before a run ends."""

    max_refresh = 0.5  # rich's own: an estimate that changes every frame is unreadable

    def render(self, task: Task) -> Text:
        remaining = task.time_remaining
        if remaining is None or task.finished:
            return Text("")
        return Text(f"ETA {format_elapsed(remaining)}", style="progress.remaining")


def console(stream: TextIO) -> Console:
    """A console on `stream`; one that is not a terminal (a pipe, a file) is wide, so
    tables are not folded to 80 columns."""
    wide = None if _isatty(stream) else PIPE_WIDTH
    return Console(file=stream, highlight=False, soft_wrap=True, width=wide)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def failure_line(row: EvalRow) -> Text:
    """One line for a run that did not pass: outcome, case, epoch, run id, why."""
    style = _STYLES[row.outcome]
    line = Text()
    line.append(f"{row.outcome.upper():5}", style=f"bold {style}")
    line.append(f" case {terminal_safe(row.case)} epoch {row.epoch}")
    if row.variant:
        line.append(f" variant {row.variant}")
    if row.run_id:
        line.append(f" (run {row.run_id})", style="dim")
    reasons = [
        f"{name}: {value.error or value.outcome}"
        for name, value in row.scores.items()
        if value.passed is not True
    ]
    if row.error and (not reasons or row.error_kind not in ("", "scorer")):
        reasons.insert(0, row.error)
    if reasons:
        line.append(": " + _short(terminal_safe("; ".join(reasons))))
    return line


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_CHARS else flat[: ERROR_CHARS - 1] + "…"


def print_summary(result: EvalResult, console: Console) -> None:
    """The summary table (per scorer: pass rate, pass^k, mean score, errors) and totals;
    in an eval with variants, one block per variant, then each compared with the first."""
    blocks = [(name, result.variant(name)) for name in result.variants] or [("", result)]
    for name, part in blocks:
        summary = part.summary
        lines = summary.table()
        title = f"eval {result.eval_id} — {terminal_safe(result.workflow)}"
        table = Table(title=title + (f" — variant {name}" if name else ""), title_justify="left")
        for header in lines[0]:
            table.add_column(header, justify="left" if header in ("scorer", "kind") else "right")
        for line in lines[1:]:
            table.add_row(*[Text(terminal_safe(cell)) for cell in line])
        console.print(table)
        console.print(Text(summary.totals_line()))
    for comparison in result.comparisons():
        console.print(Text(terminal_safe(comparison.to_text())))


def print_rows(result: EvalResult, rows: Sequence[EvalRow], console: Console) -> None:
    """The rows as a table, failed and errored ones first."""
    from awf_nb.evals.results import ordered_rows, row_cells, table_header

    table = Table(title=f"eval {result.eval_id} — {terminal_safe(result.workflow)}",
                  title_justify="left")  # fmt: skip
    for header in [*table_header(result.scorers, bool(result.variants)), "run"]:
        wraps = header == "error"
        table.add_column(header, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis")
    for row in ordered_rows(rows):
        cells = [*row_cells(row, result.scorers, bool(result.variants)), row.run_id]
        cells[-2] = _short(cells[-2])
        table.add_row(*[Text(terminal_safe(c)) for c in cells], style=_STYLES[row.outcome])
    console.print(table)


def run_eval_in_terminal(
    run: EvalRun, progress: Any, held: Sequence[int] | None = None
) -> EvalResult:
    """Run the eval on a fresh event loop; Ctrl-C (or SIGTERM) cancels it, resumable.

    `held`: the signals received while the eval was prepared (see commands/evals.py): any
    one of them cancels it as soon as it starts."""
    holder: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    def on_signal(_signum: int, _frame: object) -> None:
        if holder:
            loop, task = holder[0]
            if not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
            holder.clear()  # a second press is ignored: the runs are being saved

    async def main() -> EvalResult:
        holder.append((asyncio.get_running_loop(), asyncio.current_task()))  # type: ignore[arg-type]
        if held:  # our handlers are in place: nothing received from here on is lost
            on_signal(held[0], None)
        try:
            return await run.execute(progress)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return run.result()

    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[signum] = signal.signal(signum, on_signal)
    try:
        return asyncio.run(main())
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
