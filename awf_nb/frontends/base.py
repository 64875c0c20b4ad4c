"""What the frontends share: whether the person is asked through them (`AskPolicy`).

A frontend is a class with `open(request, control) -> Session` (the `Frontend` protocol of
`awf_nb.runs.session`) and `eval_progress()`, what shows an evaluation (None: nothing); the
ones here are `HeadlessFrontend` (headless.py), `TerminalFrontend` (terminal/frontend.py)
and `NotebookFrontend` (notebook/frontend.py), picked by `auto.pick_frontend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from awf_nb.runs.session import FrontendRequest, RunControl, Session
    from awf_nb.workflow.model import Workflow

__all__ = ["AskPolicy", "ShowingFrontend"]


class ShowingFrontend(Protocol):
    """A frontend an entry point picks: it opens runs and may show evaluations."""

    def open(self, request: FrontendRequest, control: RunControl) -> Session: ...

    def eval_progress(self) -> Any: ...


@dataclass(frozen=True)
class AskPolicy:
    """When the person is asked: `request.asks` (nobody else answers), and `asks_if(workflow)`
    when given, and — on a replay — `asks_when_replayed` (the notebook magic asks only when
    the workflow has a conversation, and not on a replay: the cell then waits for its run
    like a headless one)."""

    asks_if: Callable[[Workflow], bool] | None = None
    asks_when_replayed: bool = True

    def asks(self, request: FrontendRequest) -> bool:
        return (
            request.asks
            and (self.asks_when_replayed or not request.replayed)
            and (self.asks_if is None or self.asks_if(request.workflow))
        )
