"""The evals' entry points below the frontends: build an `EvalSpec` from a file or from
Python arguments, run it or resume it with a progress listener, read a past one.

The public `awf_nb.evaluate` (`awf_nb/api.py`) adds the choice of frontend on top.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from awf_nb.errors import UserError
from awf_nb.evals.cassettes import cassette_options
from awf_nb.evals.driver import (
    EvalOptions,
    EvalProgress,
    EvalRun,
    resume_eval,
    start_eval,
)
from awf_nb.evals.loader import EvalSpec, check_spec, load_eval, load_eval_text
from awf_nb.evals.results import EvalResult
from awf_nb.evals.storage import EvalFolder, list_evals
from awf_nb.store import Store

__all__ = [
    "EvalOptions",
    "EvalProgress",
    "EvalResult",
    "EvalRun",
    "EvalSpec",
    "list_evals",
    "load_eval",
    "load_eval_text",
    "open_eval",
    "prepare_eval",
    "prepare_resume",
    "rescore",
    "spec_from_arguments",
]


def spec_from_arguments(
    *,
    workflow: Any,
    dataset: Any,
    inputs: Mapping[str, Any] | None = None,
    user: Any = None,
    scorers: Sequence[Any] = (),
    epochs: int = 1,
    concurrency: int | None = None,
    limits: Mapping[str, Any] | None = None,
    yes: bool = False,
    seed: int | None = None,
    cwd: Path | None = None,
    pricing: Mapping[str, Any] | None = None,
    budget: float | None = None,
) -> EvalSpec:
    """An `EvalSpec` from Python values: `workflow` a path or a loaded `Workflow`,
    `dataset` a path, a list of dicts or a data frame, `user` a `SimulatedUser` or a dict
    like the file's `user:`, `scorers` dicts like the file's (or `ScorerSpec`s)."""
    from pydantic import ValidationError

    from awf_nb.evals.datasets import cases_from_rows, load_dataset
    from awf_nb.evals.model import DEFAULT_CONCURRENCY, EvalFile
    from awf_nb.workflow.loader import load_workflow
    from awf_nb.workflow.model import Workflow

    base = (cwd or Path.cwd()).resolve()
    loaded = workflow if isinstance(workflow, Workflow) else load_workflow(workflow, cwd=base)
    dataset_path = isinstance(dataset, str | os.PathLike)
    data = {
        "workflow": str(loaded.source_path or loaded.name),
        "dataset": os.fspath(dataset) if dataset_path else "<rows>",
        "inputs": dict(inputs or {}),
        "user": _user(user),
        "scorers": [
            s if isinstance(s, Mapping) else s.model_dump(by_alias=True, exclude_none=True)
            for s in scorers
        ],
        "epochs": epochs,
        "concurrency": concurrency if concurrency is not None else DEFAULT_CONCURRENCY,
        "limits": dict(limits or {}),
        "yes": yes,
        "seed": seed,
        "pricing": dict(pricing or {}),
        "budget": budget,
    }
    try:
        file = EvalFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "eval"
        raise UserError(
            f"evaluate(): {where}: {first['msg'].removeprefix('Value error, ')}"
        ) from None
    if dataset_path:
        path = Path(dataset)
        cases = load_dataset(path if path.is_absolute() else base / path, label=os.fspath(dataset))
    else:
        cases = cases_from_rows(dataset)
    spec = EvalSpec(file=file, workflow=loaded, cases=cases, base_dir=base, label="evaluate()")
    check_spec(spec)
    return spec


def _user(user: Any) -> Any:
    if user is None or isinstance(user, Mapping):
        return user
    if isinstance(user, str):
        return {"persona": user}
    return {
        "persona": user.persona,
        "provider": user.provider,
        "options": dict(user.options),
        "max_turns": user.max_turns,
        "opener": user.opener,
        "retries": user.retries,
        "desired_turns": user.desired_turns,
        "max_chars": user.max_chars,
        "end_tool": user.end_tool,
    }


def prepare_eval(
    spec: EvalSpec | str | os.PathLike[str],
    *,
    epochs: int | None = None,
    limit: int | None = None,
    concurrency: int | None = None,
    seed: int | None = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
    record_missing: str | os.PathLike[str] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    storage: Store | str | os.PathLike[str] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    otlp: str | None = None,
    trace_content: bool = False,
    budget: float | None = None,
    variants: Sequence[str] | None = None,
) -> EvalRun:
    """A new eval, ready to `await run.execute(progress)`: `spec` an `EvalSpec` or the
    path of an eval file. `otlp` / `trace_content`: the runs' traces
    (docs/observability.md). `variants`: of the file's variants, these only."""
    if not isinstance(spec, EvalSpec):
        spec = load_eval(spec, cwd=cwd)
    mode, folder = cassette_options(record, replay, record_missing)
    options = EvalOptions(
        epochs=epochs, limit=limit, concurrency=concurrency, seed=seed, cassette_mode=mode,
        cassette_dir=folder, executor=executor, ray_address=ray_address, workers=workers,
        otlp=otlp, trace_content=trace_content,
        budget=budget, variants=tuple(variants or ()),
    )  # fmt: skip
    return start_eval(
        spec, options, store=_store(storage), cwd=cwd, env=None if env is None else dict(env)
    )


def prepare_resume(
    eval_id: str,
    *,
    concurrency: int | None = None,
    storage: Store | str | os.PathLike[str] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    budget: float | None = None,
) -> EvalRun:
    """The eval `eval_id` (or a unique prefix), to finish what it had not (an eval started
    with `executor="ray"` resumes on Ray: `ray_address` and `workers` as when starting;
    `budget` replaces its budget in USD)."""
    return resume_eval(
        eval_id, store=_store(storage), concurrency=concurrency, cwd=cwd,
        env=None if env is None else dict(env), ray_address=ray_address, workers=workers,
        budget=budget,
    )  # fmt: skip


async def rescore(
    eval_id: str,
    *,
    scorers: Sequence[Any] | str | os.PathLike[str] | None = None,
    storage: Store | str | os.PathLike[str] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> EvalResult:
    """Score the stored runs of eval `eval_id` again, as a new eval (no run started; no
    model called but judges'): `scorers` a scorers file's path, a list like the file's
    `scorers:`, or None for the eval's own."""
    from pydantic import ValidationError

    from awf_nb.evals.model import ScorerSpec
    from awf_nb.evals.rescore import load_scorers, rescore_eval

    specs: list[ScorerSpec] | None = None
    if isinstance(scorers, str | os.PathLike):
        specs = load_scorers(scorers, cwd=cwd)
    elif scorers is not None:
        try:
            specs = [s if isinstance(s, ScorerSpec) else ScorerSpec.model_validate(s)
                     for s in scorers]  # fmt: skip
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "scorers"
            raise UserError(
                f"rescore(): {where}: {first['msg'].removeprefix('Value error, ')}"
            ) from None
    return await rescore_eval(
        eval_id, store=_store(storage), scorers=specs, cwd=cwd,
        env=None if env is None else dict(env),
    )  # fmt: skip


def open_eval(eval_id: str, *, storage: Store | str | os.PathLike[str] | None = None) -> EvalResult:
    """A past eval's result, as its folder holds it."""
    return EvalFolder.open(_store(storage), eval_id).result()


def _store(storage: Store | str | os.PathLike[str] | None) -> Store:
    return storage if isinstance(storage, Store) else Store(storage)
