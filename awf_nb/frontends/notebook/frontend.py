"""The notebook frontend: `NotebookFrontend` opens a `NotebookSession` per run — a new
`RunPanel` (the run drawn live from its events), its text box as the run's reader when the
person is asked, its buttons answering breakpoints — and the session runs the run: it
shows the panel in the cell, binds the text box and the Stop / Cancel run buttons to the
run's `RunControl` on the run's loop, and says in the panel when the run could not start.

The `%%awf` magic (magic.py) and `awf_nb.arun` in a kernel both come here, picked by
`frontends/auto.py`. IPython and ipywidgets are imported only when a run is opened.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from awf_nb.errors import AwfError
from awf_nb.frontends.base import AskPolicy
from awf_nb.runs.session import Execute, Session

if TYPE_CHECKING:
    from awf_nb.frontends.notebook.eval_table import EvalTable
    from awf_nb.frontends.notebook.handle import RunHandle
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader
    from awf_nb.runs.results import RunResult
    from awf_nb.runs.session import FrontendRequest, RunControl
    from awf_nb.store import Store

__all__ = ["NotebookFrontend", "NotebookSession", "start_branch"]


@dataclass(frozen=True)
class NotebookFrontend:
    """Runs drawn in a panel in the cell. `asks`: when the person is asked in its text box;
    `display`: whether running shows the panel (False: the caller shows it, or nobody)."""

    asks: AskPolicy = field(default_factory=AskPolicy)
    display: bool = True

    def open(self, request: FrontendRequest, control: RunControl) -> NotebookSession:
        from awf_nb.frontends.notebook.panel import RunPanel
        from awf_nb.frontends.notebook.panel_pause import PanelDebugger
        from awf_nb.frontends.notebook.reader import WidgetReader

        asks = self.asks.asks(request)
        workflow = request.workflow
        panel = RunPanel(
            workflow.name,
            interactive=asks,
            workflow=workflow,
            store=request.store,
            start_branch=start_branch,
        )
        # Stop and Cancel run act on this run from now on, whatever runs when pressed.
        panel.attach(stop=control.stop, cancel=control.cancel)
        # A person watches the panel (not a headless run): its buttons answer breakpoints.
        debugger = PanelDebugger(panel) if request.interactive else None
        return NotebookSession(
            reader=WidgetReader() if asks else None,
            sink=panel,
            asks=asks,
            debugger=debugger,
            panel=panel,
            control=control,
            display=self.display,
        )

    def eval_progress(self) -> EvalTable:
        """The live eval table, shown in the cell."""
        from awf_nb.frontends.notebook.eval_table import EvalTable

        table = EvalTable()
        table.display()
        return table


@dataclass
class NotebookSession(Session):
    """One run in a notebook cell: its `panel`, its text box (`reader`, when it asks)."""

    panel: RunPanel | None = None
    control: RunControl | None = None
    display: bool = True

    @property
    def text_box(self) -> WidgetReader | None:
        from awf_nb.frontends.notebook.reader import WidgetReader

        return self.reader if isinstance(self.reader, WidgetReader) else None

    def show(self) -> None:
        """Show the panel in the current cell's output (once)."""
        from awf_nb.frontends.notebook.panel import display_panel

        if self.panel is not None and self.panel.display_handle is None:
            display_panel(self.panel)

    async def run(self, execute: Execute) -> RunResult:
        """Show the panel (unless `display` is off), bind its controls on this loop, run."""
        if self.display:
            self.show()
        loop = asyncio.get_running_loop()
        reader = self.text_box
        if reader is not None:
            reader.bind(loop)
        if self.panel is not None and self.control is not None:
            control = self.control
            self.panel.attach(reader=reader, stop=control.stop, cancel=control.cancel, loop=loop)
        try:
            return await execute()
        except AwfError as exc:  # the run could not start (e.g. its storage is unwritable)
            self._show_failure(str(exc))
            raise
        except Exception as exc:
            self._show_failure(f"internal error: {type(exc).__name__}: {exc}")
            raise

    def _show_failure(self, message: str) -> None:
        if self.panel is not None:
            self.panel.abort(message)


def start_branch(run_id: str, step: str, store: Store) -> RunHandle:
    """Start `run_id` (a fork just made) from `step` in a panel of its own, not displayed:
    "Branch from here" places it below the original (panel_branch.py)."""
    from awf_nb.frontends.notebook.handle import RunHandle
    from awf_nb.frontends.notebook.run_mode import workflow_needs_input
    from awf_nb.runs.options import Resume, RunOptions
    from awf_nb.runs.setup import prepare_run

    frontend = NotebookFrontend(AskPolicy(workflow_needs_input, False), display=False)
    options = RunOptions(interactive=True, frontend=frontend)
    prepared = prepare_run(Resume(run_id, from_step=step), options, storage=store)
    handle = RunHandle(prepared, name="_branch")
    handle.start()
    return handle
