"""The one place that picks how a run is shown: terminal, notebook, headless.

`awf run`, `%awf`/`%%awf` and `awf_nb.run()`/`arun()` all come here (the `tqdm.auto` idea):

- `pick_frontend(show)` — `"notebook"` inside a Jupyter kernel, `"terminal"` when a person
  watches a terminal (or `show=True`), `"headless"` otherwise or with `show=False`;
- `FrontendChoice(kind, …)` is what the entry point puts in `RunOptions.frontend`; the run
  set-up (`awf_nb.runs.prepare_run`) opens it once, before the run is made, and the run
  gets its reader and sink: the widget panel (and its text box) in a notebook; replies
  streamed to stdout, progress to stderr and a `> ` prompt in a terminal; nothing shown
  when headless.

Replies given up front (`--reply`, `replies=[…]`) always answer the conversation turns, in
every frontend (the set-up sees to that). Without them, only an interactive run asks the
person.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.runs.options import FrontendIO, FrontendRequest

if TYPE_CHECKING:
    from awf_nb.frontends.terminal import OutputMode
    from awf_nb.workflow.model import Workflow

Frontend = Literal["terminal", "notebook", "headless"]
Show = bool | Literal["auto"]

__all__ = ["Frontend", "FrontendChoice", "Show", "in_kernel", "pick_frontend"]


def pick_frontend(show: Show = "auto", *, shell: Any = None) -> Frontend:
    """How to show a run here. `show="auto"` shows it when someone can see it."""
    if show is False:
        return "headless"
    if in_kernel(shell):
        return "notebook"
    if show is True or _isatty(sys.stderr):
        return "terminal"
    return "headless"


def in_kernel(shell: Any = None) -> bool:
    """Whether this runs inside a Jupyter kernel (widgets can be drawn).

    `shell` defaults to the running IPython, looked up only if IPython is already imported:
    asking must not import it (`awf` and plain scripts never load IPython).
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


@dataclass(frozen=True)
class FrontendChoice:
    """A frontend for `RunOptions.frontend`: `kind`, the terminal's reply mode `output`;
    `asks_if`, a test of the workflow that must also hold for the person to be asked, and
    `asks_when_replayed`, whether to ask once a cassette's messages run out (the notebook
    magic asks only when the workflow has a conversation, and not on a replay: the cell
    then waits for its run like a headless one)."""

    kind: Frontend
    output: OutputMode = "streaming"
    asks_if: Callable[[Workflow], bool] | None = None
    asks_when_replayed: bool = True

    def open(self, request: FrontendRequest) -> FrontendIO:
        """The reader and sink of this frontend for one run (a new panel, a new terminal
        sink): `request.asks` says whether the person may be asked at all."""
        if self.kind == "headless":
            return FrontendIO()
        asks = (
            request.asks
            and (self.asks_when_replayed or not request.replayed)
            and (self.asks_if is None or self.asks_if(request.workflow))
        )
        if self.kind == "terminal":
            from awf_nb.frontends.terminal import TerminalReader, TerminalSink

            reader = None
            if asks:
                # Typed messages are remembered (arrow up) next to the runs, when stored.
                history = getattr(request.store, "input_history_path", None)
                reader = TerminalReader(history_path=history)
            typed_on_tty = reader is not None and reader.is_tty
            # Replayed messages were typed by nobody at this terminal: shown like --reply.
            echo = request.replayed or not typed_on_tty
            sink = TerminalSink(self.output, echo_input=echo)
            debugger = _debugger(reader) if request.interactive else None
            return FrontendIO(reader, sink, view=sink, asks=asks, debugger=debugger)
        from awf_nb.frontends.notebook.panel import RunPanel
        from awf_nb.frontends.notebook.reader import WidgetReader

        workflow = request.workflow
        from awf_nb.frontends.notebook.panel_pause import PanelDebugger

        panel = RunPanel(workflow.name, interactive=asks, workflow=workflow, store=request.store)
        reader = WidgetReader() if asks else None
        # A person watches the panel (not a headless run): its buttons answer breakpoints.
        debugger = PanelDebugger(panel) if request.interactive else None
        return FrontendIO(reader, panel, view=panel, asks=asks, debugger=debugger)


def _debugger(reader: Any) -> Any:
    """The terminal's answer to breakpoints, when a person types at this terminal."""
    from awf_nb.frontends.terminal import TerminalReader
    from awf_nb.frontends.terminal_debugger import TerminalDebugger

    if reader is None:
        if not _isatty(sys.stdin):
            return None
        reader = TerminalReader()
    return TerminalDebugger(reader) if reader.is_tty else None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
