"""The one place that picks how a run is shown and connects it: terminal, notebook, headless.

`awf run`, `%awf`/`%%awf` and `awf_nb.run()`/`arun()` all come here (the `tqdm.auto` idea):

- `pick_frontend(show)` — `"notebook"` inside a Jupyter kernel, `"terminal"` when a person
  watches a terminal (or `show=True`), `"headless"` otherwise or with `show=False`;
- `connect(runner, frontend, …)` gives the runner its input reader and event sink: the
  widget panel (and its text box) in a notebook; replies streamed to stdout, progress to
  stderr and a `> ` prompt in a terminal; nothing shown when headless.

Replies given up front (`--reply`, `replies=[…]`) always answer the conversation turns, in
every frontend. Without them, only an interactive run asks the person.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from awf_nb.engine.run import Runner
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.terminal import OutputMode, TerminalSink

Frontend = Literal["terminal", "notebook", "headless"]
Show = bool | Literal["auto"]

__all__ = ["Frontend", "Show", "connect", "in_kernel", "pick_frontend"]


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


def connect(
    runner: Runner,
    frontend: Frontend,
    *,
    replies: list[str] | None = None,
    interactive: bool = True,
    output: OutputMode = "streaming",
) -> RunPanel | TerminalSink | None:
    """Give `runner` the reader and sink of `frontend`; return the panel or terminal sink.

    `interactive`: the person may be asked for conversation messages (a text box in a
    notebook, the `> ` prompt in a terminal). `output` is the terminal's reply mode.
    """
    from awf_nb.frontends.scripted import ScriptedReader

    config = runner.config
    scripted = ScriptedReader(replies) if replies is not None else None
    if frontend == "headless":
        config.reader = scripted
        return None
    if frontend == "terminal":
        from awf_nb.frontends.terminal import TerminalReader, TerminalSink

        reader = scripted
        if reader is None and interactive:
            # Typed messages are remembered (arrow up) next to the runs, when they are stored.
            history = getattr(config.store, "input_history_path", None)
            reader = TerminalReader(history_path=history)
        typed_on_tty = isinstance(reader, TerminalReader) and reader.is_tty
        sink = TerminalSink(output, echo_input=not typed_on_tty)
        config.reader, config.sink = reader, sink
        return sink
    from awf_nb.frontends.notebook.panel import RunPanel
    from awf_nb.frontends.notebook.reader import WidgetReader

    asks = scripted is None and interactive
    config.reader = scripted or (WidgetReader() if asks else None)
    panel = RunPanel(runner.workflow.name, interactive=asks, workflow=runner.workflow)
    config.sink = panel
    return panel


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
