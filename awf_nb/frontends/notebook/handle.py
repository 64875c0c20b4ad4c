"""What a notebook run gives the person: its `RunHandle`, and `AwfCellError` for a run that
failed (one short red paragraph instead of a traceback).

`%%awf --out chat` binds `chat` to the handle: `await chat` gives the `RunResult`,
`chat.result()`, `chat.cancel()`, `chat.state`; displayed, it shows the run's summary.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from awf_nb.errors import AwfError
from awf_nb.frontends.notebook.summary import esc

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.engine.summary import RunSummary
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.runs.results import RunResult
    from awf_nb.runs.setup import PreparedRun

__all__ = ["DEFAULT_HANDLE", "AwfCellError", "RunHandle", "cell_error"]

DEFAULT_HANDLE = "_awf"

# Background runs: the event loop keeps only weak references to tasks.
_RUNNING: set[asyncio.Task[Any]] = set()


class AwfCellError(Exception):
    """A workflow or provider error, shown as one short red paragraph instead of a traceback.

    The cell still fails (so nbval, nbclient and papermill notice). `result` is the
    `RunResult` of a run that failed or was cancelled, when there is one.
    """

    def __init__(
        self, message: str, *, result: RunResult | None = None, shown: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.result = result
        # What the cell shows instead of `message` when the run's panel already states the
        # error (in its step, or in the summary): a failed cell says it once.
        self.shown = shown

    def _render_traceback_(self) -> list[str]:
        lines = (self.shown or self.message).splitlines() or [""]
        return [f"\x1b[0;31m{lines[0]}\x1b[0m", *lines[1:]]


def cell_error(err: AwfError) -> AwfCellError:
    return AwfCellError(str(err))


class RunHandle:
    """A run started from a cell. `await h` -> RunResult; `h.result()`, `h.cancel()`.

    A failed or cancelled run raises `AwfCellError` from `await h` and `h.result()` (its
    `result` attribute holds the RunResult); `h.state` is the live `RunState` at any time.
    """

    def __init__(self, prepared: PreparedRun, *, name: str = "") -> None:
        """`prepared`: the run, opened in its frontend's session (the notebook panel, or
        the terminal of a terminal IPython, or nothing with --output silent)."""
        self.prepared = prepared
        self.session = prepared.session
        # A notebook session has the run's panel; a terminal IPython's session has none.
        self.panel: RunPanel | None = getattr(self.session, "panel", None)
        self.name = name or DEFAULT_HANDLE
        self.task: asyncio.Task[RunResult] | None = None

    @property
    def run_id(self) -> str:
        return self.prepared.run_id

    @property
    def workflow(self) -> str:
        return self.prepared.workflow.name

    @property
    def state(self) -> RunState:
        return self.prepared.state

    @property
    def status(self) -> str:
        return self.prepared.state.status

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Schedule the run in its session on `loop` (default: the running loop, else
        IPython's)."""
        if self.task is not None:
            return
        if loop is None:
            loop = _current_loop()
        self.task = loop.create_task(self.prepared.run(), name=f"awf run {self.run_id}")
        _RUNNING.add(self.task)
        self.task.add_done_callback(_forget)

    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def cancel(self) -> bool:
        """Cancel the run (its state is kept: `%awf resume RUN_ID` continues it)."""
        if self.task is None or self.task.done():
            return False
        # The run executes inside this task, so cancelling it is `RunControl.cancel()` — and
        # also works before the run has reached its first step.
        self.task.cancel()
        return True

    def interrupt(self) -> str:
        """Like Ctrl-C in a terminal: interrupt the reply being streamed, else cancel the run."""
        return self.prepared.control.interrupt()

    def result(self) -> RunResult:
        """The RunResult of a finished run; a clear error while it runs or when it failed."""
        task = self.task
        if task is None or not task.done():
            raise AwfCellError(
                f"run {self.run_id} of {self.workflow} is still running; "
                f"`await {self.name}` waits for it, `{self.name}.cancel()` stops it"
            )
        if task.cancelled():
            raise AwfCellError(
                f"run {self.run_id} of {self.workflow} was cancelled; "
                f"continue it with %awf resume {self.run_id}",
                result=self._partial_result(),
            )
        error = task.exception()
        if isinstance(error, AwfError):
            raise AwfCellError(str(error), shown=self._see_above("could not run")) from error
        if error is not None:
            raise error
        result = task.result()
        if not result.ok:
            what = "was cancelled" if result.state.status == "cancelled" else "failed"
            shown = self._see_above(what)
            raise AwfCellError(_failure_message(result), result=result, shown=shown)
        return result

    def _see_above(self, what: str) -> str | None:
        """The cell's short word on a run whose panel (shown in this cell) states what
        happened; None when there is no panel to look at."""
        if self.panel is None or self.panel.display_handle is None:
            return None
        return f"workflow {self.workflow} {what} (see the run above)"

    def _partial_result(self) -> RunResult:
        return self.prepared.result()

    async def wait(self) -> RunResult:
        """Wait for the end of the run (not cancelled if this wait is), then `result()`."""
        if self.task is None:
            raise AwfCellError(f"run {self.run_id} of {self.workflow} was never started")
        await asyncio.wait({self.task})
        return self.result()

    def __await__(self) -> Any:
        return self.wait().__await__()

    # --- display ------------------------------------------------------------------------------

    def summary(self) -> RunSummary:
        from awf_nb.engine.summary import RunSummary

        return RunSummary.from_state(self.prepared.state)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        if not self.done():
            text = repr(self)
            return {"text/plain": text, "text/html": f"<code>{esc(text)}</code>"}
        from awf_nb.frontends.notebook.summary import summary_html, summary_text

        summary = self.summary()
        return {"text/plain": summary_text(summary), "text/html": summary_html(summary)}

    def __repr__(self) -> str:
        step = self.prepared.state.current_step
        where = f" at step {step}" if step and not self.done() else ""
        return f"<awf run {self.workflow}: {self.status}{where} (run {self.run_id})>"


def _forget(task: asyncio.Task[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved here; `result()` re-raises it for the person


def _failure_message(result: RunResult) -> str:
    state = result.state
    what = "was cancelled" if state.status == "cancelled" else f"failed: {state.error}"
    return (
        f"workflow {state.workflow_name} {what}\n"
        f"(run {state.run_id}; continue it with %awf resume {state.run_id})"
    )


def _current_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop()
