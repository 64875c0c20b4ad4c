"""The headless frontend: shows nothing and asks nobody (evaluations, plain Python, a
script whose output is not a terminal, `show=False`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from awf_nb.runs.session import Session

if TYPE_CHECKING:
    from awf_nb.runs.session import FrontendRequest, RunControl

__all__ = ["HeadlessFrontend"]


class HeadlessFrontend:
    """Runs as they are: the headless `Session` (no reader, no sink)."""

    def open(self, request: FrontendRequest, control: RunControl) -> Session:
        return Session()

    def eval_progress(self) -> None:
        return None

    def __repr__(self) -> str:
        return "HeadlessFrontend()"
