"""The seam between a run and the frontend that shows it: `Frontend.open(request, control)`
gives a `Session`, and the session runs the prepared run.

    prepared = prepare_run(workflow, RunOptions(frontend=SomeFrontend()))
    result = await prepared.run()      # or prepared.run_sync() where the session owns the loop

`prepare_run` makes one `RunControl` per run (Stop and Cancel), opens the frontend once
with it, and binds the engine's run to it: the notebook panel's buttons and the terminal's
Ctrl-C act on the control they were given when the frontend opened; nothing is wired
afterwards. A `Session` is what the frontend gives the run (where the person's messages come
from, where events go, who answers breakpoints) and how it runs it: the base class runs it
as it is (headless: evaluations, plain Python); a frontend that shows something overrides
`run` / `run_sync` (the notebook displays its panel first, the terminal owns the event loop,
SIGINT and SIGTERM).

A new frontend (a TUI, a web page) is then one `Frontend` class and one `Session` subclass.
This module imports no frontend and no engine run loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from awf_nb.engine.breakpoints import Debugger
    from awf_nb.engine.ports import EventSink, InputReader
    from awf_nb.engine.state import RunState
    from awf_nb.runs.results import RunResult
    from awf_nb.store import Store
    from awf_nb.workflow.model import Workflow

__all__ = ["Execute", "Frontend", "FrontendRequest", "RunControl", "Session"]

# What a session calls to run the prepared run to its end (on the running loop).
Execute = Callable[[], Awaitable["RunResult"]]


class _Controlled(Protocol):
    """What a run control acts on: the engine's run (`Runner`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def state(self) -> RunState: ...

    def cancel(self) -> None: ...

    def interrupt(self) -> str: ...

    def interrupt_turn(self) -> bool: ...


class RunControl:
    """Stop and Cancel of one run, made by `prepare_run` before anything else and bound to
    the engine's run once it is made. A frontend keeps it from `open` on: its Stop button
    and Ctrl-C call it, whatever happens to be running then."""

    def __init__(self) -> None:
        self._run: _Controlled | None = None

    def bind(self, run: _Controlled) -> None:
        """Called once by `prepare_run`, when the run is made."""
        if self._run is not None:
            raise RuntimeError("this RunControl already controls a run")
        self._run = run

    @property
    def run_id(self) -> str:
        return self._bound().run_id

    @property
    def state(self) -> RunState:
        """The run's live state."""
        return self._bound().state

    def stop(self) -> bool:
        """Stop the reply being streamed (or its tool calls), nothing else; False when no
        reply is being streamed."""
        return self._run.interrupt_turn() if self._run is not None else False

    def cancel(self) -> None:
        """Cancel the whole run (its state is kept: it can be resumed)."""
        if self._run is not None:
            self._run.cancel()

    def interrupt(self) -> str:
        """Ctrl-C: stop the reply being streamed ("turn"), else cancel the run ("run")."""
        return self._run.interrupt() if self._run is not None else "run"

    def _bound(self) -> _Controlled:
        if self._run is None:
            raise RuntimeError("this RunControl is not bound to a run yet")
        return self._run


@dataclass(frozen=True)
class FrontendRequest:
    """What a frontend is told when a run is made."""

    workflow: Workflow
    store: Store | None
    asks: bool  # the person may be asked: no replies or reader of the caller's answer
    replayed: bool  # a cassette's recorded messages answer first
    # A person may answer at all (`interactive`; False: a headless notebook run, nbclient):
    # breakpoints are answered only then, so an unattended run never waits at one.
    interactive: bool = True


@dataclass
class Session:
    """One run as a frontend shows it: where the person's messages come from (`reader`,
    None: nobody is asked), where events go (`sink`), whether the person is asked through
    it (`asks`), who answers pauses at breakpoints (`debugger`), and how it runs.

    The base class is the headless session: it shows nothing and runs the run as it is.
    """

    reader: InputReader | None = None
    sink: EventSink | None = None
    asks: bool = False
    debugger: Debugger | None = None

    def show(self) -> None:
        """Show the run where the person looks, before it starts (the notebook's panel in
        the cell's output); nothing here."""

    async def run(self, execute: Execute) -> RunResult:
        """Run to the end on the running event loop."""
        return await execute()

    def run_sync(self, execute: Execute) -> RunResult:
        """Run to the end on a new event loop (no loop may be running in this thread)."""
        return asyncio.run(self.run(execute))


class Frontend(Protocol):
    """How a run is shown and who is asked (implemented in `awf_nb.frontends`): opened once
    per run by `prepare_run`, before the run is made."""

    def open(self, request: FrontendRequest, control: RunControl) -> Session: ...
