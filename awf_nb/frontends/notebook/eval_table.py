"""An eval in a notebook: a live table of its runs, a progress line with ETA, Stop, and a
run's conversation on click.

`EvalTable` is the notebook's `EvalProgress`. Rows fill in as runs finish (pass green,
fail red, error grey, running blue, cancelled orange: JupyterLab's theme variables, so the
dark theme reads too); the progress line counts what is done and estimates what is left;
Stop cancels the runs in flight — they are saved as cancelled, and `%%awf eval --resume
EVAL_ID` finishes the eval. Clicking a row shows that run's conversation below the table,
drawn by the run panel itself from the stored run. When the eval ends, the cell's output
also gets the static HTML table (`EvalResult._repr_html_`), so the saved notebook shows
the results anywhere, without a kernel.

The table is a small anywidget (eval_table.js, shipped in the package); its rows are sent
at most every `FLUSH_SECONDS`, however fast runs finish.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets
import traitlets

from awf_nb.evals.results import row_cells, table_header
from awf_nb.frontends.notebook.panel_items import PanelBox

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.evals.driver import EvalRun
    from awf_nb.evals.results import EvalResult, EvalRow
    from awf_nb.store import Store

FLUSH_SECONDS = 0.2


class EvalTableView(anywidget.AnyWidget):
    """The table itself: rows in, the clicked row's run id out (`selected`)."""

    _esm = Path(__file__).with_name("eval_table.js")
    header = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)


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
        self.widget = PanelBox(
            "eval",
            children=[widgets.HBox([self.progress, self.stop_button]), self.view, self.detail],
            _dom_classes=("awf-eval",),
        )
        self.view.observe(self._selected, names="selected")
        self.display_handle: Any = None
        self.store: Store | None = None
        self._stop: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush: asyncio.TimerHandle | None = None
        self._scorers: list[tuple[str, str]] = []
        self._rows: dict[tuple[str, int], dict[str, Any]] = {}
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
        from IPython.display import display

        self.display_handle = display(self.widget, display_id=True)

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
        self.view.header = table_header(self._scorers)
        for row in run.done:
            self._counts[row.outcome] += 1
            self._rows[row.key] = self._row(row)
        self._started = time.monotonic()
        self._update(now=True)

    def run_started(self, case: str, epoch: int, run_id: str) -> None:
        cells = [
            case,
            str(epoch),
            "running",
            "running",
            "",
            "",
            "",
            *["" for _ in self._scorers],
            "",
        ]
        self._rows[(case, epoch)] = {
            "key": f"{case}/{epoch}", "outcome": "running", "cells": cells, "run_id": run_id
        }  # fmt: skip
        self._update()

    def run_finished(self, row: EvalRow) -> None:
        self._finished += 1
        self._counts[row.outcome] += 1
        self._rows[row.key] = self._row(row)
        self._update()

    def eval_finished(self, result: EvalResult) -> None:
        if result.status == "cancelled":
            for key, row in self._rows.items():
                if row["outcome"] == "running":
                    row["outcome"] = "cancelled"
                    row["cells"][2] = row["cells"][3] = "cancelled"
                    self._rows[key] = dict(row)
        self.stop_button.layout.display = "none"
        self._update(now=True, final=result.status)
        if self.display_handle is not None:
            # The saved notebook keeps a static table next to the widget view.
            bundle = dict(self.widget._repr_mimebundle_() or {})
            bundle["text/html"] = result._repr_html_()
            self.display_handle.update(bundle, raw=True)

    # -- drawing --------------------------------------------------------------------------

    def _row(self, row: EvalRow) -> dict[str, Any]:
        return {
            "key": f"{row.case}/{row.epoch}",
            "outcome": row.outcome,
            "cells": row_cells(row, self._scorers),
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
            f"{_clock(elapsed)} elapsed",
        ]
        if final == "cancelled":
            resume = f"%%awf eval --resume {escape(self.eval_id)}"
            parts.append(f"cancelled — finish it with <code>{resume}</code>")
        elif final:
            parts.append(escape(final))
        elif self._finished and done < self._total:
            left = elapsed / self._finished * (self._total - done)
            parts.append(f"ETA {_clock(left)}")
        return " · ".join(part for part in parts if part)

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


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
