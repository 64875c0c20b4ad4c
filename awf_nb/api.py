"""The Python API: `load`, `arun`, `run`, `afork`, `fork`, `RunResult`, `SimulatedUser`;
`aevaluate`, `evaluate`.

    result = awf_nb.run("workflows/code-review.yaml", inputs={"target": "src"})
    result = await awf_nb.arun(yaml_text, replies=["yes", ""])
    result = awf_nb.run("chat.yaml", record="chat.cassette.jsonl")   # then replay="…"
    res = awf_nb.evaluate("evals/bread.eval.yaml")
    res = awf_nb.evaluate(workflow="workflows/chat.yaml", dataset=rows,
                          inputs={"topic": "{{.case.topic}}"},
                          user=awf_nb.SimulatedUser(persona="…", provider="local"),
                          scorers=[{"name": "ended", "condition": 'stopped_by == "user_exit"'}],
                          epochs=3, concurrency=8)
    res.summary, res.rows, res.to_pandas()

A thin layer over the run set-up (`awf_nb.runs`): it picks where the run is shown
(`show=`), then prepares it and runs it in its frontend's session, like every other entry
point (`prepare_run(...)` then `await prepared.run()`). An evaluation is `awf_nb.evals`;
here it is only shown where it runs (`show`: the frontend's `eval_progress()` — the live
table in a notebook, the progress bar on stderr in a terminal, else nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from awf_nb.engine.partner import SimulatedUser
from awf_nb.errors import AwfError, UserError
from awf_nb.frontends.auto import Show, pick_frontend
from awf_nb.runs import setup
from awf_nb.runs.options import RunOptions
from awf_nb.runs.results import RunResult
from awf_nb.runs.setup import load
from awf_nb.workflow.model import Workflow

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from awf_nb.evals.results import EvalResult
    from awf_nb.runs.options import RunKeywords

__all__ = [
    "EvalKeywords",
    "RunResult",
    "SimulatedUser",
    "aevaluate",
    "afork",
    "arun",
    "evaluate",
    "fork",
    "load",
    "run",
]


async def arun(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Run a workflow on the running event loop and return its result.

    `show` picks how the run is shown (`frontends.auto.pick_frontend`): "auto" (the
    default) shows it where someone can see it — the live panel in a notebook, streamed
    replies and progress in a terminal — and nothing in a script whose output is not a
    terminal; True always shows it, False never. A `sink` of your own replaces all that.

    The other keywords are those of `awf_nb.runs.RunOptions`, among them:
    `replies` answers conversation turns in order (then end of input). In a terminal where
    a person types (stdin and stderr are terminals, and `show` is not False), a
    conversation asks at a `> ` prompt; otherwise, without `replies` or `reader`, it ends
    after its first reply. (To chat in a notebook, use the `%%awf` magic.)
    `user=awf_nb.SimulatedUser(persona=..., provider="local", max_turns=5)` lets an agent
    play the person in every conversation, for testing a conversational workflow.
    Runs are stored (state file, transcript, history) unless `storage=False`.

    `record=PATH` writes every provider turn and person message to a cassette (secrets
    masked); `replay=PATH` runs again from one without calling any provider, answering the
    conversation with the recorded messages first; `record_missing=PATH` does the one or
    the other, depending on whether PATH exists. `replay_speed` multiplies the recorded
    delays: 0 (the default) replays at once, 1 at the original pace.
    `yes=True` runs tool calls listed in a step's `tools.confirm` without asking (a run
    with nobody to ask refuses them otherwise). `limits={"max_tokens": 20000}` adds limits
    on top of the workflow's own. `model="ollama:llama3.2"` runs every `provider: local`
    step on that model instead of the bundled one (default: $AWF_MODEL; the forms are in
    docs/providers.md).

    The `AWF_LOG` environment variable (debug, info, warning, error) shows awf's log
    messages on stderr.
    """
    from awf_nb import logs

    logs.configure_from_env()
    given = RunOptions(inputs=inputs or {}, **options)
    if given.sink is None and given.frontend is None:
        from awf_nb.frontends.terminal.frontend import TerminalFrontend

        frontend = pick_frontend(show)
        # The person types at a `> ` prompt only in a terminal they type into.
        types = isinstance(frontend, TerminalFrontend) and _isatty(sys.stdin)
        given = dataclasses.replace(
            given, frontend=frontend, interactive=given.interactive and types
        )
    return await setup.prepare_run(workflow, given).run()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run(
    workflow: str | os.PathLike[str] | Workflow,
    inputs: Mapping[str, Any] | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Synchronous `arun`. Inside a running event loop (a notebook), use `await arun(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(workflow, inputs, show=show, **options))
    raise AwfError(
        "awf_nb.run() cannot be used inside a running event loop",
        hint="use `await awf_nb.arun(...)` instead (or the %%awf magic in a notebook)",
    )


async def afork(
    run_id: str,
    at: str,
    edit: str | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Branch from here: a new run with `run_id`'s history up to step `at` (`"STEP"` or,
    in a conversation, `"STEP#TURN"`: its TURN-th message), that message replaced by `edit`
    when given; then it goes on, as `arun` does (same keywords). The original run is not
    changed; the new one records `forked_from`."""
    from awf_nb.runs.fork import fork_run
    from awf_nb.runs.options import Resume
    from awf_nb.store import Store

    storage = options.get("storage")
    if storage is False:  # the original is read from a store, and the branch kept in it
        raise UserError(
            f"cannot fork run {run_id} without storage: a branch is a stored run",
            hint="give storage= the store that holds the run, or leave it out for the default",
        )
    if isinstance(storage, Store):
        store = storage
    else:
        store = Store(None if storage is None or storage is True else Path(storage))
    env = options.get("env")
    new_id, point = fork_run(store, run_id, at, edit, env=None if env is None else dict(env))
    options["storage"] = store
    return await arun(Resume(new_id, from_step=point.resume_step), show=show, **options)  # type: ignore[arg-type]


def fork(
    run_id: str,
    at: str,
    edit: str | None = None,
    *,
    show: Show = "auto",
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Synchronous `afork`. Inside a running event loop (a notebook), use `await afork(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(afork(run_id, at, edit, show=show, **options))
    raise AwfError(
        "awf_nb.fork() cannot be used inside a running event loop",
        hint="use `await awf_nb.afork(...)` instead (or %awf fork in a notebook)",
    )


# --- evaluations -------------------------------------------------------------------------------


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
        )
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
        # A file's own epochs, concurrency and seed, unless given here.
        file_overrides: dict[str, Any] = {
            "epochs": epochs,
            "concurrency": concurrency,
            "seed": seed,
        }
    else:
        if workflow is None or dataset is None:
            raise AwfError("evaluate() needs an eval file, or workflow= and dataset=")
        spec = spec_from_arguments(
            workflow=workflow, dataset=dataset, inputs=inputs, user=user, scorers=scorers,
            epochs=1 if epochs is None else epochs, concurrency=concurrency, limits=limits,
            yes=yes, seed=seed, pricing=pricing,
            cwd=base,
        )  # fmt: skip
        file_overrides = {"epochs": None, "concurrency": None, "seed": None}  # in the spec
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
    return pick_frontend(show if isinstance(show, bool) else "auto").eval_progress()
