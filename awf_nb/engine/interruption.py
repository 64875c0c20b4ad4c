"""Ctrl-C / Stop during a turn: `TurnInterruption`, the span of a turn that an interrupt
cuts short (`Runner.interruptible`, `Runner.interrupt`), and `PartnerInterrupted`, what a
conversation partner raises when it was cut short."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awf_nb.engine.run import Runner


class PartnerInterrupted(Exception):
    """Ctrl-C / Stop while the partner agent was writing: the person may take over."""


class TurnInterruption:
    """The span of a turn that Ctrl-C / Stop cuts short: a reply streaming, its tool calls
    running (`Runner.interruptible`).

    `Runner.interrupt` cancels the task running the turn, and leaving the span ends that
    cancellation there (`uncancel`): the turn goes on, marked interrupted (`happened`).
    A cancellation someone else asked for too (the run's, a task group's) goes on up.
    The task itself is cancelled, not a child task made for the span: a turn's rounds
    then cost no task and no extra passes of the event loop.
    """

    __slots__ = ("_run", "_task", "happened")

    def __init__(self, run: Runner) -> None:
        self._run = run
        self._task: asyncio.Task[Any] | None = None
        self.happened = False

    def __enter__(self) -> TurnInterruption:
        self._task = asyncio.current_task()
        self._run._turn_task, self._run._turn_interrupted = self._task, False
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        run, task = self._run, self._task
        run._turn_task = None
        if not run._turn_interrupted or task is None:
            return False
        run._turn_interrupted = False
        if task.uncancel() > 0:  # cancelled by someone else too: that goes on
            return False
        if exc_type is not None and not issubclass(exc_type, asyncio.CancelledError):
            return False  # another error came first: it is what the caller must see
        self.happened = True
        return True  # the CancelledError that interrupt() caused ends here
