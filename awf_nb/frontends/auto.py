"""The one place that picks how a run is shown: notebook, terminal, headless.

`awf_nb.run()`/`arun()`, `awf_nb.evaluate()` and `%awf`/`%%awf` all come here (the
`tqdm.auto` idea): `pick_frontend(show)` gives the `NotebookFrontend` inside a Jupyter
kernel, the `TerminalFrontend` when a person watches a terminal (or `show=True`), the
`HeadlessFrontend` otherwise or with `show=False`. The entry point puts it in
`RunOptions.frontend`; the run set-up (`awf_nb.runs.prepare_run`) opens it once, and the
session it opens runs the run (`prepared.run()`). `frontend.eval_progress()` is what shows
an evaluation there (the live table, the progress bar, nothing).

Replies given up front (`--reply`, `replies=[…]`) always answer the conversation turns, in
every frontend (the set-up sees to that). Without them, only an interactive run asks the
person.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.frontends.base import AskPolicy
from awf_nb.frontends.headless import HeadlessFrontend

if TYPE_CHECKING:
    from awf_nb.frontends.base import ShowingFrontend
    from awf_nb.frontends.terminal import OutputMode
    from awf_nb.workflow.model import Workflow

Show = bool | Literal["auto"]

__all__ = ["Show", "in_kernel", "pick_frontend"]


def pick_frontend(
    show: Show = "auto",
    *,
    shell: Any = None,
    output: OutputMode = "streaming",
    asks_if: Callable[[Workflow], bool] | None = None,
    asks_when_replayed: bool = True,
) -> ShowingFrontend:
    """How to show a run here. `show="auto"` shows it when someone can see it.

    `output`: the terminal's reply mode; `asks_if` / `asks_when_replayed`: when the person
    is asked (`base.AskPolicy`)."""
    if show is False:
        return HeadlessFrontend()
    asks = AskPolicy(asks_if, asks_when_replayed)
    if in_kernel(shell):
        from awf_nb.frontends.notebook.frontend import NotebookFrontend

        return NotebookFrontend(asks)
    if show is True or _isatty(sys.stderr):
        from awf_nb.frontends.terminal.frontend import TerminalFrontend

        return TerminalFrontend(output, asks)
    return HeadlessFrontend()


def in_kernel(shell: Any = None) -> bool:
    """Whether this runs inside a Jupyter kernel (widgets can be drawn).

    `shell` defaults to the running IPython, looked up only if IPython is already imported:
    asking must not import it (`awf` and plain scripts never load IPython).
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
