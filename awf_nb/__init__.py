"""awf-nb: run AWF agent workflows in Jupyter (`%%awf`), the terminal (`awf run`) and Python.

The public API is imported lazily so that `import awf_nb` stays fast and never pulls in
IPython, ipywidgets or httpx:

    import awf_nb
    result = awf_nb.run("workflows/code-review.yaml", inputs={"target": "src"})
    result.status, result.outputs

Every error awf raises on purpose is an `awf_nb.AwfError` (a message and a hint):
`UserError` (what was asked cannot be done: a bad input, a missing file; `InputError` for
an input), `DefinitionError` (a workflow or eval file that does not validate, with its
problems), `ExecutionError` (a step or a provider failed; `ProviderError`), and
`AwfSystemError` (the machine: a full disk, a store that cannot be written).
"""

from __future__ import annotations

from awf_nb._version import __version__

# Not `typing.TYPE_CHECKING`: importing typing is a third of `awf --version`'s start-up.
# Type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False

__all__ = [
    "AwfError",
    "AwfSystemError",
    "DefinitionError",
    "EvalResult",
    "ExecutionError",
    "InputError",
    "Pause",
    "PauseAnswer",
    "PauseStream",
    "ProviderError",
    "RunResult",
    "SimulatedUser",
    "UserError",
    "__version__",
    "aevaluate",
    "afork",
    "arun",
    "evaluate",
    "fork",
    "load",
    "load_ipython_extension",
    "run",
]

_ERRORS = (
    "AwfError", "AwfSystemError", "DefinitionError", "ExecutionError", "InputError",
    "ProviderError", "UserError",
)  # fmt: skip

if TYPE_CHECKING:
    from typing import Any

    from awf_nb.api import (
        RunResult,
        SimulatedUser,
        aevaluate,
        afork,
        arun,
        evaluate,
        fork,
        load,
        run,
    )
    from awf_nb.engine.breakpoints import Pause, PauseAnswer, PauseStream
    from awf_nb.errors import (
        AwfError,
        AwfSystemError,
        DefinitionError,
        ExecutionError,
        InputError,
        ProviderError,
        UserError,
    )
    from awf_nb.evals.results import EvalResult


_API = (
    "run",
    "arun",
    "fork",
    "afork",
    "load",
    "RunResult",
    "SimulatedUser",
    "evaluate",
    "aevaluate",
)


def __getattr__(name: str) -> Any:
    if name in _API:
        from awf_nb import api

        return getattr(api, name)
    if name in ("Pause", "PauseAnswer", "PauseStream"):  # breakpoints: on_pause
        from awf_nb.engine import breakpoints

        return getattr(breakpoints, name)
    if name in _ERRORS:
        from awf_nb import errors

        return getattr(errors, name)
    if name == "EvalResult":
        from awf_nb.evals.results import EvalResult

        return EvalResult
    raise AttributeError(f"module 'awf_nb' has no attribute {name!r}")


def __dir__() -> list[str]:
    # What a person exploring the package (dir(), tab completion) should find: the public
    # names, lazy ones included, not the module's own imports.
    return sorted(__all__)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext awf_nb`: registers the `%%awf` / `%awf` magics (imports IPython lazily)."""
    from awf_nb.frontends.notebook.magic import load_ipython_extension as _load

    _load(ipython)
