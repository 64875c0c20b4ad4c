"""Starting a run: the options (`RunOptions`, `Resume`), the one set-up function every entry
point uses (`prepare_run` → `PreparedRun`), and what a finished run gives back
(`RunResult`).

    from awf_nb.runs import RunOptions, prepare_run

    prepared = prepare_run("workflows/chat.yaml", RunOptions(replies=["hi", ""]))
    result = await prepared.run()

This layer sits below the frontends and above the engine, providers, tools and store: it
is where they are put together. Frontends take part through the `Frontend` seam
(`session.py`: a frontend opens a `Session` that runs the prepared run, with the run's
`RunControl`); this package never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Frontend",
    "FrontendRequest",
    "PreparedRun",
    "ReplayReport",
    "Resume",
    "RunControl",
    "RunOptions",
    "RunResult",
    "Session",
    "load",
    "prepare_run",
]

if TYPE_CHECKING:
    from awf_nb.runs.options import Resume, RunOptions
    from awf_nb.runs.results import ReplayReport, RunResult
    from awf_nb.runs.session import Frontend, FrontendRequest, RunControl, Session
    from awf_nb.runs.setup import PreparedRun, load, prepare_run

_OPTIONS = ("Resume", "RunOptions")
_SESSION = ("Frontend", "FrontendRequest", "RunControl", "Session")


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one of the light modules (options, results) does not load
    # the engine's whole run machinery.
    if name in _OPTIONS:
        from awf_nb.runs import options

        return getattr(options, name)
    if name in _SESSION:
        from awf_nb.runs import session

        return getattr(session, name)
    if name in ("ReplayReport", "RunResult"):
        from awf_nb.runs import results

        return getattr(results, name)
    if name in ("PreparedRun", "load", "prepare_run"):
        from awf_nb.runs import setup

        return getattr(setup, name)
    raise AttributeError(f"module 'awf_nb.runs' has no attribute {name!r}")
