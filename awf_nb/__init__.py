"""awf-nb: run AWF agent workflows in Jupyter (`%%awf`), the terminal (`awf run`) and Python.

The public API is imported lazily so that `import awf_nb` stays fast and never pulls in
IPython, ipywidgets or httpx:

    import awf_nb
    result = awf_nb.run("workflows/code-review.yaml", inputs={"target": "src"})
    result.status, result.outputs
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from awf_nb._version import __version__

__all__ = [
    "EvalResult",
    "RunResult",
    "SimulatedUser",
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

if TYPE_CHECKING:
    from awf_nb.api import RunResult, SimulatedUser, afork, arun, fork, load, run
    from awf_nb.eval_api import aevaluate, evaluate
    from awf_nb.evals.results import EvalResult


def __getattr__(name: str) -> Any:
    if name in ("run", "arun", "fork", "afork", "load", "RunResult", "SimulatedUser"):
        from awf_nb import api

        return getattr(api, name)
    if name in ("evaluate", "aevaluate"):
        from awf_nb import eval_api

        return getattr(eval_api, name)
    if name == "EvalResult":
        from awf_nb.evals.results import EvalResult

        return EvalResult
    raise AttributeError(f"module 'awf_nb' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext awf_nb`: registers the `%%awf` / `%awf` magics (imports IPython lazily)."""
    from awf_nb.frontends.notebook.magic import load_ipython_extension as _load

    _load(ipython)
