"""An eval in a notebook: a live table of its runs, a progress line with ETA, Stop, and a
run's conversation on click.

`EvalTable` is the notebook's `EvalProgress`. In an eval with variants, the comparison of
each variant with the first is shown under the table and computed again as runs finish
(at most every `COMPARE_SECONDS`, with `LIVE_RESAMPLES` bootstrap resamples; the full
comparison when the eval ends), so its interval narrows as the evidence comes in; each
flipped case is a button that shows the two variants' conversations side by side.

Rows fill in as runs finish (pass green, fail red, error grey, running blue, cancelled
orange: JupyterLab's theme variables, so the dark theme reads too); the progress line
counts what is done and estimates what is left; Stop cancels the runs in flight — they
are saved as cancelled, and `%%awf eval --resume EVAL_ID` finishes the eval. Clicking a
row shows that run's conversation below the table, drawn by the run panel itself from
the stored run. When the eval ends, the live table in the cell's output gives way to the
static HTML table (`EvalResult._repr_html_`), so the saved notebook shows the results
anywhere, without a kernel or network.

The table is a small anywidget (eval_table.js, shipped in the package); its rows are sent
at most every `FLUSH_SECONDS`, however fast runs finish.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets
import traitlets

from awf_nb.engine.summary import format_elapsed
from awf_nb.evals.results import row_cells, summary_text, table_header
from awf_nb.frontends.notebook.panel_items import PanelBox
from awf_nb.safe_text import mark_bidi

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.evals.driver import EvalRun
    from awf_nb.evals.results import EvalResult, EvalRow
    from awf_nb.store import Store

FLUSH_SECONDS = 0.2
# When the eval ends, the static table keeps the conversations of this many runs (failed
# and errored rows first, as the table orders them), each behind its row: a saved notebook
# stays a readable size however many runs an eval has.
SAVED_CONVERSATIONS = 50
# The live comparison of variants: recomputed at most this often, with fewer bootstrap
# resamples than the final one (2,000), and with at most this many flips as buttons.
COMPARE_SECONDS = 2.0
LIVE_RESAMPLES = 400
SHOWN_FLIPS = 20


class EvalTableView(anywidget.AnyWidget):
    """The table itself: rows in, the clicked row's run id out (`selected`)."""

    _esm = Path(__file__).with_name("eval_table.js")
    header = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # run id -> the run's conversation as static HTML, for the saved copy of the table
        self.conversations: dict[str, str] = {}

    def static_html(self) -> str:
        """The table as eval_table.js draws it (same classes, same colours), each row with
        a saved conversation followed by it, folded: readable with no kernel."""
        from html import escape

        cell = 'style="padding: 2px 8px"'
        head = "".join(
            f'<th style="text-align: left; padding: 2px 8px; border-bottom: 1px solid '
            f'var(--jp-border-color1, #ccc)">{escape(name)}</th>'
            for name in self.header
        )
        body = []
        for row in self.rows:
            outcome = str(row.get("outcome", ""))
            colour = _COLOURS.get(outcome, "transparent")
            cells = "".join(
                f'<td {cell}><b style="color: {colour}">{escape(str(text))}</b></td>'
                if index == 2
                else f"<td {cell}>{escape(str(text))}</td>"
                for index, text in enumerate(row.get("cells", []))
            )
            body.append(
                f'<tr class="awf-eval-row awf-eval-{escape(outcome)}" '
                f'data-key="{escape(str(row.get("key", "")))}" '
                f'style="border-left: 4px solid {colour}">{cells}</tr>'
            )
            conversation = self.conversations.get(str(row.get("run_id", "")))
            if conversation:
                body.append(
                    f'<tr class="awf-eval-saved"><td colspan="{max(len(self.header), 1)}">'
                    f"<details><summary>conversation</summary>{conversation}</details></td></tr>"
                )
        table = (
            '<table class="awf-eval-table" style="border-collapse: collapse; '
            "color: var(--jp-ui-font-color1, inherit); font-size: var(--jp-ui-font-size1, "
            f'13px)"><tr>{head}</tr>{"".join(body)}</table>'
        )
        return f'<div class="awf-eval-live">{table}</div>'


# The row colours of eval_table.js: JupyterLab's theme variables, with fallbacks.
_COLOURS = {
    "pass": "var(--jp-success-color1, #388e3c)",
    "fail": "var(--jp-error-color1, #d32f2f)",
    "error": "var(--jp-layout-color3, #9e9e9e)",
    "running": "var(--jp-brand-color1, #1976d2)",
    "cancelled": "var(--jp-warn-color1, #f57c00)",
    "pending": "var(--jp-layout-color2, #eeeeee)",
}


class EvalTable:
    """The notebook's view of an eval (see the module docstring)."""

    def __init__(self) -> None:
        self.progress = widgets.HTML("starting…", _dom_classes=("awf-eval-progress",))
        self.stop_button = widgets.Button(
            description="Stop", button_style="warning", _dom_classes=("awf-eval-stop",)
        )
        self.stop_button.on_click(lambda _: self.stop())
        self.view = EvalTableView()
        self.detail = widgets.VBox(_dom_classes=("awf-eval-detail",))
        self.comparison = widgets.VBox(_dom_classes=("awf-eval-comparison",))
        self.widget = PanelBox(
            "eval",
            children=[
                widgets.HBox([self.progress, self.stop_button]),
                self.view,
                self.comparison,
                self.detail,
            ],
            _dom_classes=("awf-eval",),
        )
        self.view.observe(self._selected, names="selected")
        self.display_handle: Any = None
        self.in_background = False  # the cell has returned: its output is replaced in place
        self.store: Store | None = None
        self._stop: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush: asyncio.TimerHandle | None = None
        self._scorers: list[tuple[str, str]] = []
        self._variants = False  # the eval has variants: a column of its own
        self._variant_names: list[str] = []
        self._finished_rows: dict[tuple[str, int, str], EvalRow] = {}
        self._compared_at = 0.0
        self._compare: asyncio.TimerHandle | None = None
        self._rows: dict[tuple[str, int, str], dict[str, Any]] = {}
        self._total = 0
        self._done_before = 0
        self._executor: Any = None  # a remote eval's, which says where its runs are
        self._concurrency = 0
        self._finished = 0
        self._counts = {"pass": 0, "fail": 0, "error": 0}
        self._started = time.monotonic()
        self.eval_id = ""

    # -- showing and stopping -----------------------------------------------------------------

    def display(self) -> None:
        from awf_nb.frontends.notebook.panel_static import show_live

        self.display_handle = show_live(self.widget)

    def attach(self, stop: Callable[[], None]) -> None:
        """What Stop does (cancel the task running the eval)."""
        self._stop = stop

    def stop(self) -> None:
        if self._stop is not None:
            self.progress.value = "stopping: the runs in flight are being saved as cancelled…"
            self.stop_button.disabled = True
            self._stop()

    # -- EvalProgress ---------------------------------------------------------------------

    def eval_started(self, run: EvalRun) -> None:
        self._loop = asyncio.get_running_loop()
        self.store = run.folder.store
        self.eval_id = run.eval_id
        self._scorers = list(run.scorers)
        self._total = run.total
        # where the runs go, when not in this kernel (a local eval's is the default)
        executor = getattr(run, "executor", None)
        if executor is not None and executor.name != "local":
            self._executor = executor
            self._concurrency = run.manifest.concurrency
        self._done_before = len(run.done)
        self._variants = bool(run.manifest.variants)
        self._variant_names = list(run.manifest.variants)
        self._finished_rows = {row.run_key: row for row in run.done}
        self.view.header = table_header(self._scorers, self._variants)
        for row in run.done:
            self._counts[row.outcome] += 1
            self._rows[row.run_key] = self._row(row)
        self._started = time.monotonic()
        self._update(now=True)

    def run_started(self, case: str, epoch: int, run_id: str, variant: str = "") -> None:
        cells = [
            mark_bidi(case),
            str(epoch),
            *([variant] if self._variants else []),
            "running",
            "running",
            "",
            "",
            "",
            *["" for _ in self._scorers],
            "",
        ]
        self._rows[(case, epoch, variant)] = {
            "key": mark_bidi(f"{case}/{epoch}" + (f"/{variant}" if variant else "")),
            "outcome": "running",
            "cells": cells,
            "run_id": run_id,
        }
        self._update()

    def run_finished(self, row: EvalRow) -> None:
        self._finished += 1
        self._counts[row.outcome] += 1
        self._rows[row.run_key] = self._row(row)
        self._finished_rows[row.run_key] = row
        self._update()
        self._compare_soon()

    def eval_finished(self, result: EvalResult) -> None:
        if self._compare is not None:
            self._compare.cancel()
            self._compare = None
        shown = self._show_comparison(result.comparisons() if len(result.variants) > 1 else [])
        gates = self._show_gates(result)
        if result.variants:
            # one summary per variant above the comparison (the saved copy keeps them)
            summaries = summary_text(result)
            block = widgets.HTML(f"<pre>{escape(summaries)}</pre>",
                                 _dom_classes=("awf-eval-summaries",))  # fmt: skip
            self.comparison.children = (block, *self.comparison.children)
            plain = "\n\n".join([summaries, *shown])
        else:
            plain = result.summary.to_text()
        if gates:
            plain += "\n\n" + gates
        if result.status == "cancelled":
            for key, row in self._rows.items():
                if row["outcome"] == "running":
                    row["outcome"] = "cancelled"
                    at = 3 if self._variants else 2  # outcome, then status
                    row["cells"][at] = row["cells"][at + 1] = "cancelled"
                    self._rows[key] = dict(row)
        self.stop_button.layout.display = "none"
        self._update(now=True, final=result.status)
        if self.display_handle is not None:
            # The live table gives way to its static copy: a saved notebook shows it offline
            # (a widget view with its saved state would be drawn instead, blank there).
            from awf_nb.frontends.notebook.panel_static import replace_live_output, static_html

            self._save_conversations()
            self.detail.children = ()  # each row keeps its conversation in the copy
            bundle = {"text/html": static_html(self.widget), "text/plain": plain}
            replace_live_output(self.display_handle, bundle, in_place=self.in_background)

    def _save_conversations(self) -> None:
        """The conversations of the first SAVED_CONVERSATIONS rows, for the static copy."""
        from awf_nb.errors import AwfError
        from awf_nb.frontends.notebook.panel_static import static_html

        if self.store is None:
            return
        run_ids = [str(r["run_id"]) for r in self.view.rows if r.get("run_id")]
        for run_id in run_ids[:SAVED_CONVERSATIONS]:
            try:
                state = self.store.load_state(run_id)
            except AwfError:
                continue
            self.view.conversations[run_id] = static_html(
                conversation_panel(state).widget, css=False
            )

    # -- drawing --------------------------------------------------------------------------

    def _row(self, row: EvalRow) -> dict[str, Any]:
        # the cells are untrusted (a case id, a scorer's error): eval_table.js shows them as
        # text, and their bidi controls as marks, as the panel does
        return {
            "key": mark_bidi(
                f"{row.case}/{row.epoch}" + (f"/{row.variant}" if row.variant else "")
            ),
            "outcome": row.outcome,
            "cells": [mark_bidi(cell) for cell in row_cells(row, self._scorers, self._variants)],
            "run_id": row.run_id,
        }

    def _update(self, *, now: bool = False, final: str = "") -> None:
        self.progress.value = self._progress_line(final)
        if now or self._loop is None:
            self._send_rows()
        elif self._flush is None:
            self._flush = self._loop.call_later(FLUSH_SECONDS, self._send_rows)

    def _send_rows(self) -> None:
        self._flush = None
        rank = {"running": 0, "cancelled": 1, "error": 2, "fail": 3, "pass": 4}
        ordered = sorted(self._rows.values(), key=lambda r: (rank.get(r["outcome"], 5), r["key"]))
        self.view.rows = [dict(r, cells=list(r["cells"])) for r in ordered]

    def _progress_line(self, final: str) -> str:
        from html import escape

        done = self._done_before + self._finished
        c = self._counts
        elapsed = time.monotonic() - self._started
        parts = [
            f"eval {escape(self.eval_id)}: {done}/{self._total} runs",
            escape(self._executor.describe(self._concurrency)) if self._executor else "",
            f"✓ {c['pass']} ✗ {c['fail']} ! {c['error']}",
            f"{format_elapsed(elapsed)} elapsed",
        ]
        if final == "cancelled":
            resume = f"%%awf eval --resume {escape(self.eval_id)}"
            parts.append(f"cancelled — finish it with <code>{resume}</code>")
        elif final:
            parts.append(escape(final))
        elif self._finished and done < self._total:
            left = elapsed / self._finished * (self._total - done)
            parts.append(f"ETA {format_elapsed(left)}")
        return " · ".join(part for part in parts if part)

    # -- the variants compared, live ------------------------------------------------------

    def _compare_soon(self) -> None:
        """Compare the variants again, now or when `COMPARE_SECONDS` have passed since the
        last time (never more often: a bootstrap over many cases takes a while)."""
        if len(self._variant_names) < 2 or self._compare is not None:
            return
        wait = self._compared_at + COMPARE_SECONDS - time.monotonic()
        if wait <= 0 or self._loop is None:
            self._compare_now()
        else:
            self._compare = self._loop.call_later(wait, self._compare_now)

    def _compare_now(self) -> None:
        from awf_nb.evals.compare import compare_variants
        from awf_nb.evals.results import EvalResult

        self._compare = None
        self._compared_at = time.monotonic()
        so_far = EvalResult(self.eval_id, "", list(self._finished_rows.values()), self._scorers,
                            1, variants=self._variant_names)  # fmt: skip
        self._show_comparison(compare_variants(so_far, resamples=LIVE_RESAMPLES), live=True)

    def _show_gates(self, result: EvalResult) -> str:
        """The eval file's gates, checked, under the comparison (their text; "" if none)."""
        from awf_nb.errors import AwfError

        try:
            checked = result.gates()
        except AwfError as exc:  # a folder that cannot be read: said, not raised
            checked, text = [], f"gates: {exc.message}"
        else:
            marks = {True: "gate holds ", False: "GATE FAILS ", None: "GATE UNDECIDED "}
            text = "\n".join(f"{marks[g.holds]} {g.gate.text}: {g.detail}" for g in checked)
        if text:
            block = widgets.HTML(f"<pre>{escape(text)}</pre>", _dom_classes=("awf-eval-gates",))
            self.comparison.children = (*self.comparison.children, block)
        return text

    def _show_comparison(self, comparisons: list[Any], *, live: bool = False) -> list[str]:
        """Show `comparisons` under the table; their text as shown (one per comparison)."""
        children: list[Any] = []
        texts: list[str] = []
        for comparison in comparisons:
            lines = comparison.lines()
            scorers = 1 + len(comparison.scorers)  # the title and a line per scorer
            note = " (so far)" if live else ""
            texts.append("\n".join(lines[:scorers]))
            children.append(widgets.HTML(f"<pre>{escape(texts[-1])}{note}</pre>",
                                         _dom_classes=("awf-eval-compared",)))  # fmt: skip
            buttons = []
            for flip in comparison.flips[:SHOWN_FLIPS]:
                mark = "+" if flip.direction == "better" else "−"
                button = widgets.Button(
                    description=f"{mark} {flip.case}"[:40],
                    tooltip=f"{flip.case}: {comparison.a} and {comparison.b} side by side",
                    _dom_classes=("awf-eval-flip",),
                )
                button.on_click(lambda _, f=flip, c=comparison: self._side_by_side(c, f))
                buttons.append(button)
            if buttons:
                children.append(widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")))
        self.comparison.children = tuple(children)
        return texts

    def _side_by_side(self, comparison: Any, flip: Any) -> None:
        """The flipped case's first run in each variant, next to each other."""
        from awf_nb.errors import UserError

        if self.store is None:
            return
        columns = []
        for name, runs in ((comparison.a, flip.a_runs), (comparison.b, flip.b_runs)):
            title = widgets.HTML(f"<b>{mark_bidi(name)}</b>")
            if not runs:
                columns.append(widgets.VBox([title, widgets.HTML("no run")]))
                continue
            try:
                state = self.store.load_state(runs[0])
            except UserError as exc:
                columns.append(widgets.VBox([title, widgets.HTML(exc.message)]))
                continue
            columns.append(widgets.VBox([title, conversation_panel(state).widget],
                                        layout=widgets.Layout(width="50%")))  # fmt: skip
        self.detail.children = (widgets.HBox(columns, _dom_classes=("awf-eval-side-by-side",)),)

    # -- a run's conversation -------------------------------------------------------------

    def _selected(self, change: dict[str, Any]) -> None:
        run_id = change["new"]
        if not run_id or self.store is None:
            return
        from awf_nb.errors import UserError

        try:
            state = self.store.load_state(run_id)
        except UserError as exc:
            self.detail.children = (widgets.HTML(f"run {run_id}: {exc.message}"),)
            return
        self.detail.children = (conversation_panel(state).widget,)


def conversation_panel(state: RunState) -> Any:
    """A run panel drawing a stored run as it was shown live: its steps, the conversation
    bubbles of both sides, the summary."""
    from awf_nb.engine import events as ev
    from awf_nb.engine.summary import RunSummary
    from awf_nb.frontends.notebook.panel import RunPanel

    panel = RunPanel(f"{state.workflow_name} — run {state.run_id}")
    emit, run_id = panel.emit, state.run_id
    emit(ev.RunStarted(run_id, state.workflow_name, state.inputs))
    for name in dict.fromkeys(state.executed):
        step = state.steps.get(name)
        if step is None:
            continue
        conv = step.conversation
        emit(ev.StepStarted(run_id, name, "agent" if conv is not None else "step",
                            mode="conversation" if conv is not None else ""))  # fmt: skip
        if conv is not None:
            reply = 0
            for turn in conv.turns:
                if turn.role == "user":
                    emit(ev.UserMessage(run_id, name, turn.content, reply + 1, turn.speaker))
                elif turn.role == "assistant" and turn.content:
                    reply += 1
                    emit(ev.TurnStarted(run_id, name, reply))
                    emit(ev.AgentText(run_id, name, turn.content))
                    emit(ev.TurnFinished(run_id, name, reply, turn.tokens, turn.duration,
                                         text=turn.content))  # fmt: skip
        output = step.output if conv is None else ""
        emit(ev.StepFinished(run_id, name, step.status, step.duration, tokens=step.tokens_used,
                             error=step.error, output=output))  # fmt: skip
    emit(ev.RunFinished(run_id, RunSummary.from_state(state)))
    panel.flush()
    return panel
