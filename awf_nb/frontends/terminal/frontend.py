"""The terminal frontend: `TerminalFrontend` opens a `TerminalSession` per run — replies
streamed to stdout, progress to stderr (`TerminalSink`), a `> ` prompt when the person
types here (`TerminalReader`), breakpoints answered at it — and the session runs the run.

`TerminalSession.run_sync` (`awf run`, `awf resume`) owns the event loop, SIGINT and
SIGTERM: Ctrl-C acts the chat way (`terminal.CtrlC`) through the run's `RunControl`, which
the session was given when the frontend opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from awf_nb.frontends.base import AskPolicy
from awf_nb.frontends.terminal import CtrlC, OutputMode, TerminalReader, TerminalSink
from awf_nb.runs.results import RunResult
from awf_nb.runs.session import Execute, Session

if TYPE_CHECKING:
    from awf_nb.frontends.terminal.eval_progress import TerminalEvalProgress
    from awf_nb.runs.session import FrontendRequest, RunControl

__all__ = ["DOUBLE_PRESS_SECONDS", "TerminalFrontend", "TerminalSession"]

# Two Ctrl-C presses within this many seconds cancel the run even while a reply streams.
DOUBLE_PRESS_SECONDS = 1.0


@dataclass(frozen=True)
class TerminalFrontend:
    """Runs shown in this terminal, in the reply mode `output` (streaming, buffered,
    silent); `asks`: when the person is asked at the `> ` prompt."""

    output: OutputMode = "streaming"
    asks: AskPolicy = field(default_factory=AskPolicy)

    def open(self, request: FrontendRequest, control: RunControl) -> TerminalSession:
        reader = None
        if self.asks.asks(request):
            # Typed messages are remembered (arrow up) next to the runs, when stored.
            history = getattr(request.store, "input_history_path", None)
            reader = TerminalReader(history_path=history)
        typed_on_tty = reader is not None and reader.is_tty
        # Replayed messages were typed by nobody at this terminal: shown like --reply.
        echo = request.replayed or not typed_on_tty
        sink = TerminalSink(self.output, echo_input=echo)
        debugger = _debugger(reader) if request.interactive else None
        return TerminalSession(
            reader=reader, sink=sink, asks=reader is not None, debugger=debugger, control=control
        )

    def eval_progress(self) -> TerminalEvalProgress:
        """The progress bar on stderr; the summary is the caller's to print
        (`res.summary.to_text()`): stdout stays theirs."""
        import io

        from awf_nb.frontends.terminal.eval_progress import TerminalEvalProgress

        return TerminalEvalProgress(out=io.StringIO())


@dataclass
class TerminalSession(Session):
    """One run in this terminal. `sink` is its `TerminalSink`; `control` its Stop/Cancel."""

    sink: TerminalSink = field(default_factory=TerminalSink)
    control: RunControl | None = None
    double_press: float = DOUBLE_PRESS_SECONDS
    # None: stdin is not a terminal (CI, a script, `nohup`) — see `run_sync`.
    headless: bool | None = None

    def run_sync(self, execute: Execute) -> RunResult:
        """Run to completion on a fresh event loop, with Ctrl-C handled the chat way.

        A run cancelled from the keyboard is persisted with status `cancelled` (the caller
        exits with code 130; Ctrl-C stays ignored after such a cancel).

        Headless (stdin is not a terminal): nobody is there to go on after a reply is cut
        short, and a CI system cancelling a job sends SIGINT, so SIGINT cancels the run
        wherever it lands, as SIGTERM does. A half reply is never kept as a step's output
        and published by the steps after it.
        """
        import signal

        control = self.control
        if control is None:
            raise RuntimeError("a TerminalSession runs a run its frontend opened it for")
        headless = self.headless if self.headless is not None else not _is_tty(sys.stdin)
        ctrl_c = CtrlC(control, self.sink.interrupted_turn, double_press=self.double_press)
        running_loop: list[asyncio.AbstractEventLoop] = []

        def cancel_run() -> None:
            ctrl_c.cancelled = True
            control.cancel()

        on_press = cancel_run if headless else ctrl_c

        def on_signal(_signum: int, _frame: object) -> None:  # between bytecodes, main thread
            if running_loop and not running_loop[0].is_closed():
                running_loop[0].call_soon_threadsafe(on_press)

        async def main() -> RunResult:
            loop = asyncio.get_running_loop()
            running_loop.append(loop)
            task = asyncio.current_task()
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, control.cancel)
            try:
                return await execute()
            except asyncio.CancelledError:
                if task is not None:
                    task.uncancel()
                return RunResult(control.state)
            finally:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(signal.SIGTERM)

        # SIGINT is swapped with signal.signal around the whole event loop, not through
        # loop.add_signal_handler: asyncio puts Python's default handler back on removal, so
        # a press while the loop closes would raise KeyboardInterrupt inside asyncio's
        # clean-up. The caller's handler is back only once the loop is gone; after a cancel
        # from the keyboard, presses stay ignored instead: the caller is exiting (code 130),
        # and a key held down must not raise KeyboardInterrupt into its clean-up.
        swapped, previous_sigint = False, None
        with contextlib.suppress(ValueError):  # not the main thread: no Ctrl-C handling
            previous_sigint = signal.signal(signal.SIGINT, on_signal)
            swapped = True
        terminal_state = _save_terminal()
        try:
            return asyncio.run(main())
        finally:
            if swapped:  # None: a handler set outside Python; Python's default stands in
                restored = previous_sigint or signal.default_int_handler
                signal.signal(signal.SIGINT, signal.SIG_IGN if ctrl_c.cancelled else restored)
            _restore_terminal(terminal_state)


def _debugger(reader: TerminalReader | None) -> Any:
    """The terminal's answer to breakpoints, when a person types at this terminal."""
    from awf_nb.frontends.terminal.debugger import TerminalDebugger

    if reader is None:
        if not _is_tty(sys.stdin):
            return None
        reader = TerminalReader()
    return TerminalDebugger(reader) if reader.is_tty else None


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _save_terminal() -> object | None:
    """readline changes terminal modes; a run cancelled mid-prompt must not leave them."""
    try:
        import termios

        if sys.stdin.isatty():
            return termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        pass
    return None


def _restore_terminal(saved: object | None) -> None:
    if saved is None:
        return
    import termios

    with contextlib.suppress(OSError, ValueError):
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)  # type: ignore[arg-type]
