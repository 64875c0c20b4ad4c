"""`awf_nb.evaluate` / `awf_nb.aevaluate`: run an eval from Python, shown where it runs.

    res = awf_nb.evaluate("evals/bread.eval.yaml")
    res = awf_nb.evaluate(workflow="workflows/chat.yaml", dataset=rows,
                          inputs={"topic": "{{.case.topic}}"},
                          user=awf_nb.SimulatedUser(persona="…", provider="local"),
                          scorers=[{"name": "ended", "condition": 'stopped_by == "user_exit"'}],
                          epochs=3, concurrency=8)
    res.summary, res.rows, res.to_pandas()

The eval itself is `awf_nb.evals`; this module only picks how it is shown (`show`): in a
notebook the live table, in a terminal the progress bar on stderr, else nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from awf_nb.errors import AwfError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from awf_nb.evals.results import EvalResult

__all__ = ["EvalKeywords", "aevaluate", "evaluate"]


class EvalKeywords(TypedDict, total=False):
    """The keywords `awf_nb.evaluate` takes besides the eval file (`aevaluate`'s, which
    says what each means), for type checkers and editors."""

    workflow: Any
    dataset: Any
    inputs: Mapping[str, Any] | None
    user: Any
    scorers: Sequence[Any]
    epochs: int | None
    concurrency: int | None
    limits: Mapping[str, Any] | None
    yes: bool
    seed: int | None
    pricing: Mapping[str, Any] | None
    budget: float | None
    variants: Sequence[str] | None
    resume: str | None
    rescore: str | None
    limit: int | None
    record: str | os.PathLike[str] | None
    replay: str | os.PathLike[str] | None
    record_missing: str | os.PathLike[str] | None
    executor: str
    ray_address: str | None
    workers: int | None
    storage: Any
    cwd: str | os.PathLike[str] | None
    env: Mapping[str, str] | None
    show: bool | str
    progress: Any


async def aevaluate(
    source: str | os.PathLike[str] | None = None,
    *,
    workflow: Any = None,
    dataset: Any = None,
    inputs: Mapping[str, Any] | None = None,
    user: Any = None,
    scorers: Sequence[Any] = (),
    epochs: int | None = None,
    concurrency: int | None = None,
    limits: Mapping[str, Any] | None = None,
    yes: bool = False,
    seed: int | None = None,
    pricing: Mapping[str, Any] | None = None,
    budget: float | None = None,
    variants: Sequence[str] | None = None,
    resume: str | None = None,
    rescore: str | None = None,
    limit: int | None = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
    record_missing: str | os.PathLike[str] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    storage: Any = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    show: bool | str = "auto",
    progress: Any = None,
) -> EvalResult:
    """Run an eval on the running event loop and return its `EvalResult`.

    Give the eval file's path as `source`, or the eval as keyword arguments (`workflow`,
    `dataset`, `inputs`, `user`, `scorers`, `epochs`, `concurrency`, `limits`, `yes`,
    `seed`: the file's keys). `epochs`, `concurrency` and `seed` also override a file's.
    `limit`: the first N cases only; `record` / `replay` / `record_missing`: a folder of
    one cassette per (case, epoch). `executor="ray"` runs the cases on a Ray cluster's
    workers (`ray_address`: the cluster, else Ray's default; `workers`: how many, else one
    per CPU of the cluster). `show`: "auto" (the default) shows a live table in a
    notebook and a progress bar in a terminal, True always, False never; a `progress` of
    your own (an `awf_nb.evals.driver.EvalProgress`) replaces them.

    Cost: `pricing` (USD per million tokens, by model) prices the tokens; `budget` (USD)
    stops starting runs once the eval has spent it (the eval ends `stopped`).
    `variants`: of an eval file's `variants:`, these only (default: all of them); the
    result compares them (`res.compare("baseline", "other")`, `res.comparisons()`).
    `resume=EVAL_ID` finishes an earlier eval instead (alone, or with `concurrency` and a
    larger `budget`). `rescore=EVAL_ID` scores that eval's stored runs again as a new
    eval, with `scorers` (a list, or a scorers file's path; default: its own) — no run
    started, no model called except judges.
    """
    from awf_nb.evals.api import prepare_eval, prepare_resume, spec_from_arguments

    base = Path(cwd).resolve() if cwd is not None else None
    if rescore is not None:
        from awf_nb.evals.api import rescore as rescore_eval

        if source is not None or workflow is not None or dataset is not None:
            raise AwfError("evaluate(rescore=...) scores stored runs: give no eval file, "
                           "workflow or dataset")  # fmt: skip
        return await rescore_eval(
            rescore, scorers=scorers or None, storage=storage, cwd=base, env=env
        )  # type: ignore[arg-type]
    if resume is not None:
        if source is not None or workflow is not None or dataset is not None:
            raise AwfError("evaluate(resume=...) continues an eval as it was started: "
                           "give no eval file, workflow or dataset")  # fmt: skip
        run = prepare_resume(
            resume, concurrency=concurrency, storage=storage, cwd=base, env=env,
            ray_address=ray_address, workers=workers, budget=budget,
        )  # fmt: skip
        return await run.execute(_progress(show) if progress is None else progress)
    if source is not None:
        if workflow is not None or dataset is not None:
            raise AwfError("evaluate(): give an eval file, or workflow= and dataset=, not both")
        spec: Any = source
        file_overrides = {"epochs": epochs, "concurrency": concurrency, "seed": seed}
    else:
        if workflow is None or dataset is None:
            raise AwfError("evaluate() needs an eval file, or workflow= and dataset=")
        spec = spec_from_arguments(
            workflow=workflow, dataset=dataset, inputs=inputs, user=user, scorers=scorers,
            epochs=1 if epochs is None else epochs, concurrency=concurrency, limits=limits,
            yes=yes, seed=seed, pricing=pricing,
            cwd=base,
        )  # fmt: skip
        file_overrides = {"epochs": None, "concurrency": None, "seed": None}
    run = prepare_eval(
        spec, limit=limit, record=record, replay=replay, record_missing=record_missing,
        executor=executor, ray_address=ray_address, workers=workers, storage=storage,
        cwd=base, env=env, budget=budget, variants=variants, **file_overrides,
    )  # fmt: skip
    if progress is None:
        progress = _progress(show)
    return await run.execute(progress)


def evaluate(
    source: str | os.PathLike[str] | None = None, **kwargs: Unpack[EvalKeywords]
) -> EvalResult:
    """Synchronous `aevaluate`. Inside a running event loop (a notebook), use
    `await awf_nb.aevaluate(...)` or the `%%awf eval` magic."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aevaluate(source, **kwargs))
    raise AwfError(
        "awf_nb.evaluate() cannot be used inside a running event loop",
        hint="use `await awf_nb.aevaluate(...)` instead (or %%awf eval in a notebook)",
    )


def _progress(show: bool | str) -> Any:
    """What shows the eval where it runs: the frontend `show` picks (`frontends.auto`)."""
    from awf_nb.frontends.auto import pick_frontend

    return pick_frontend(show if isinstance(show, bool) else "auto").eval_progress()
