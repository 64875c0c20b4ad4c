"""Starting a run: the options (`RunOptions`, `Resume`), the one set-up function every entry
point uses (`prepare_run` → `PreparedRun`), and what a finished run gives back
(`RunResult`).

    from awf_nb.runs import RunOptions, prepare_run

    prepared = prepare_run("workflows/chat.yaml", RunOptions(replies=["hi", ""]))
    result = await prepared.execute()

This layer sits below the frontends and above the engine, providers, tools and store: it
is where they are put together. Frontends take part through the `Frontend` seam
(`options.py`); this package never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Frontend",
    "FrontendIO",
    "FrontendRequest",
    "PreparedRun",
    "Resume",
    "RunOptions",
    "RunResult",
    "load",
    "prepare_run",
]

if TYPE_CHECKING:
    from awf_nb.runs.options import Frontend, FrontendIO, FrontendRequest, Resume, RunOptions
    from awf_nb.runs.results import RunResult
    from awf_nb.runs.setup import PreparedRun, load, prepare_run

_OPTIONS = ("Frontend", "FrontendIO", "FrontendRequest", "Resume", "RunOptions")


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one of the light modules (options, results) does not load
    # the engine's whole run machinery.
    if name in _OPTIONS:
        from awf_nb.runs import options

        return getattr(options, name)
    if name == "RunResult":
        from awf_nb.runs.results import RunResult

        return RunResult
    if name in ("PreparedRun", "load", "prepare_run"):
        from awf_nb.runs import setup

        return getattr(setup, name)
    raise AttributeError(f"module 'awf_nb.runs' has no attribute {name!r}")
