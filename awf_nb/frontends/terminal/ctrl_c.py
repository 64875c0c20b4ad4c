"""What Ctrl-C does during a run (`CtrlC`): one policy for `awf run` and for `%awf` in a
terminal IPython."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["CtrlC", "Interruptible"]


class Interruptible(Protocol):
    """A run Ctrl-C can act on: its `RunControl`, or a notebook `RunHandle`."""

    def interrupt(self) -> str: ...  # "turn" (a reply was cut short) or "run" (cancelled)

    def cancel(self) -> object: ...


class CtrlC:
    """What Ctrl-C does during a run — one policy for `awf run` and for `%awf` in a terminal
    IPython: while a reply streams it interrupts that reply only (back to the `> ` prompt);
    at the prompt, or twice within `double_press` seconds, it cancels the run.

    Call it (in the event loop) once per press; `cancelled` says whether a press ended the
    run.
    """

    def __init__(
        self,
        run: Interruptible,
        on_reply_interrupted: Callable[[], None],
        *,
        double_press: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = run
        self.on_reply_interrupted = on_reply_interrupted
        self.double_press = double_press
        self.clock = clock
        self.cancelled = False
        self._last_press = float("-inf")

    def __call__(self) -> None:
        pressed = self.clock()
        twice = pressed - self._last_press < self.double_press
        self._last_press = pressed
        if twice:
            self.run.cancel()
            self.cancelled = True
        elif self.run.interrupt() == "turn":
            self.on_reply_interrupted()
        else:
            self.cancelled = True
