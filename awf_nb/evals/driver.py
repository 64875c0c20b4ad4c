"""Running an eval: plan the (case, epoch) work, hand it to an executor, keep the results.

`start_eval` opens a new eval folder for an `EvalSpec`; `resume_eval` reopens one. Both
give an `EvalRun`, whose `execute()` runs what is left and returns the `EvalResult`. The
driver owns every write to the eval's folder (runs.jsonl as runs start, results.jsonl as
they finish, the manifest's status at the start and the end) and tells an `EvalProgress`
(a frontend: the terminal's progress bar, the notebook's live table) what happens.

Cassettes (recorded or replayed, one per run): evals/cassettes.py.

Seeds: every run gets its own sampling seed, derived from the eval's seed (`--seed N`, or
one drawn when the eval starts and kept in its folder) and the (case, epoch); so epochs
differ from each other, an eval started with the same seed samples the same way, and the
variants of an eval (evals/variants.py) run each (case, epoch) with the same seed: paired.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from awf_nb.errors import UserError
from awf_nb.evals.cassettes import (
    CassetteMode,
    cassette_use,
    check_cassettes,
)
from awf_nb.evals.datasets import Case
from awf_nb.evals.executor import (
    ArtifactWriter,
    EvalPlan,
    Executor,
    LocalExecutor,
    RunOutcome,
    RunStarted,
    WorkItem,
)
from awf_nb.evals.loader import EvalSpec
from awf_nb.evals.results import EvalResult, EvalRow
from awf_nb.evals.run_setup import with_limits
from awf_nb.evals.storage import EvalFolder, Manifest, now_text
from awf_nb.evals.variants import selected, stored_variants
from awf_nb.store import Store

EXECUTORS = ("local", "ray")


class EvalProgress(Protocol):
    """What a frontend is told while an eval runs (called on the eval's event loop; must
    not block)."""

    def eval_started(self, run: EvalRun) -> None: ...

    def run_started(self, case: str, epoch: int, run_id: str, variant: str = "") -> None: ...

    def run_finished(self, row: EvalRow) -> None: ...

    def eval_finished(self, result: EvalResult) -> None: ...


@dataclass(frozen=True)
class EvalOptions:
    """What the command line, `evaluate()` or the magic may change about an eval."""

    epochs: int | None = None
    limit: int | None = None  # the first N cases only
    concurrency: int | None = None
    seed: int | None = None
    cassette_mode: CassetteMode | None = None
    cassette_dir: Path | None = None
    executor: str = "local"
    ray_address: str | None = None  # --executor ray: the cluster (None: Ray's default)
    workers: int | None = None  # --executor ray: worker processes (None: the cluster's CPUs)
    # Traces of the runs (docs/observability.md): a collector to send them to (None:
    # $AWF_OTLP_ENDPOINT or none), and message contents on the spans.
    otlp: str | None = None
    trace_content: bool = False
    budget: float | None = None  # USD for the whole eval (None: the file's `budget:`)
    variants: tuple[str, ...] = ()  # `--variant NAME`: these only (none: every variant)


def run_seed(seed: int, case: str, epoch: int) -> int:
    """The seed of one (case, epoch): stable for a given eval seed, different per run."""
    digest = hashlib.sha256(f"{seed}\x00{case}\x00{epoch}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


class PendingItems:
    """An eval's work items, each built (its templates rendered) only when a worker takes
    it: planning a million runs costs neither the memory of a million items nor the time
    before the first run starts. `built` counts the items made so far."""

    def __init__(self, run: EvalRun, env: dict[str, str]) -> None:
        self.run = run
        self.env = env
        self.count = run.pending_count()
        self.built = 0

    def __len__(self) -> int:
        return self.count

    def __contains__(self, item: object) -> bool:
        return isinstance(item, WorkItem) and any(
            (case.id, epoch, variant) == item.key for case, epoch, variant in self.run.pending()
        )

    def __iter__(self) -> Iterator[WorkItem]:
        for case, epoch, variant in self.run.pending():
            if self.run.over_budget():
                # the runs in flight finish; no new one starts (`--resume --budget`)
                self.run.stopped = "budget"
                return
            self.built += 1
            yield self.run._item(case, epoch, variant, self.env)


class EvalRun:
    """One execution of an eval (new or resumed): see `execute`."""

    def __init__(
        self,
        spec: EvalSpec,
        folder: EvalFolder,
        manifest: Manifest,
        cases: list[Case],
        done: list[EvalRow],
        *,
        cwd: Path,
        env: dict[str, str] | None,
        executor: Executor,
    ) -> None:
        self.spec = spec
        self.folder = folder
        self.manifest = manifest
        self.cases = cases
        self.done = done
        self.cwd = cwd
        self.env = env
        self.executor = executor
        self.in_flight: dict[tuple[str, int, str], str] = {}
        self.rows: list[EvalRow] = list(done)
        self.planned: PendingItems | None = None  # the work items of `execute`
        self.otlp: str | None = None  # traces: see EvalOptions
        self.trace_content = False
        self.stopped = ""  # "budget": no new run started past the eval's budget
        # USD spent so far (runs and judges), each row counted once: `account` is told of
        # a row by the executor as soon as it is scored, and by `execute` when it arrives.
        self.spent = 0.0
        self._counted: set[tuple[str, int, str]] = set()
        self.pairs: list[Any] = folder.pairs()  # the pairwise judge's, decided so far
        for row in done:
            self.account(row)

    def account(self, row: EvalRow) -> None:
        if row.run_key in self._counted:
            return
        self._counted.add(row.run_key)
        self.spent += row.total_cost or 0.0

    def over_budget(self) -> bool:
        budget = self.manifest.budget
        return budget is not None and self.spent >= budget

    @property
    def eval_id(self) -> str:
        return self.folder.eval_id

    @property
    def total(self) -> int:
        return self.manifest.total

    @property
    def scorers(self) -> list[tuple[str, str]]:
        return self.manifest.scorers

    @property
    def variants(self) -> list[str]:
        """The variants run ([""]: the eval has none)."""
        return list(self.manifest.variants) or [""]

    def pending(self) -> Iterator[tuple[Case, int, str]]:
        """The (case, epoch, variant) runs without a row, in order, one at a time (never
        all of them in memory: an eval may plan up to `max_runs` of them). A case's
        variants come one after the other, so an eval stopped early leaves pairs."""
        finished = {row.run_key for row in self.done}
        for case, epoch, variant in self.pending_all():
            if (case.id, epoch, variant) not in finished:
                yield case, epoch, variant

    def pending_count(self) -> int:
        ids = {case.id for case in self.cases}
        variants = set(self.variants)
        epochs = self.manifest.epochs
        finished = {
            row.run_key for row in self.done
            if row.case in ids and row.variant in variants and 1 <= row.epoch <= epochs
        }  # fmt: skip
        return len(self.cases) * self.manifest.epochs * len(variants) - len(finished)

    def plan(self) -> EvalPlan:
        from awf_nb.evals.run_setup import environment

        env = environment(self.env)  # `.env` of the eval file's templates
        limits = self.spec.file.limits
        return EvalPlan(
            workflow=with_limits(self.spec.workflow, limits),
            variant_workflows={
                name: with_limits(variant.workflow, limits)
                for name, variant in self.spec.variants.items()
                if name in self.manifest.variants
            },
            scorers=list(self.spec.file.scorers),
            items=PendingItems(self, env),
            concurrency=self.manifest.concurrency,
            yes=self.spec.file.yes,
            cwd=self.cwd,
            base_dir=self.spec.base_dir,
            env=self.env,
            eval_id=self.eval_id,
            otlp=self.otlp,
            trace_content=self.trace_content,
            pricing=dict(self.spec.file.pricing),
            max_cost=self.spec.file.limits.max_cost,
            max_tool_processes=self.spec.file.limits.max_tool_processes,
            on_row=self.account,
        )

    def _item(self, case: Case, epoch: int, variant: str, env: dict[str, str]) -> WorkItem:
        from awf_nb.engine.partner import SimulatedUser
        from awf_nb.errors import AwfError
        from awf_nb.evals.scorers import render_case_template, render_case_value

        file, base_dir = self.spec.file, self.spec.base_dir
        data = {"case": dict(case.row), "epoch": epoch, "env": env}
        seed = run_seed(self.manifest.seed, case.id, epoch)
        cassette = cassette_use(self.manifest, case, epoch, variant)
        given = self.spec.variants[variant].inputs if variant else file.inputs
        try:
            inputs = {
                name: render_case_template(value, data, what=f"inputs.{name}", base_dir=base_dir)
                if isinstance(value, str) else value
                for name, value in given.items()
            }  # fmt: skip
            user = None
            if file.user is not None and case.replies is None:
                spec = file.user
                # Provider and options are templates too, as a step's are: a server's
                # address or key from the environment, a model from the case.
                user = SimulatedUser(
                    persona=render_case_template(
                        spec.persona, data, what="user.persona", base_dir=base_dir
                    ),
                    provider=render_case_template(
                        spec.provider, data, what="user.provider", base_dir=base_dir
                    ).strip(),
                    options=render_case_value(
                        spec.options, data, what="user.options", base_dir=base_dir
                    ),
                    max_turns=spec.max_turns,
                    opener=None
                    if spec.opener is None
                    else render_case_template(
                        spec.opener, data, what="user.opener", base_dir=base_dir
                    ),
                    retries=spec.retries,
                    desired_turns=spec.desired_turns,
                    max_chars=spec.max_chars,
                    end_tool=spec.end_tool,
                )
        except AwfError as exc:
            return WorkItem(case, epoch, seed=seed, setup_error=exc.message, variant=variant)
        return WorkItem(case, epoch, inputs, user, cassette, seed, variant=variant)

    async def execute(self, progress: EvalProgress | None = None) -> EvalResult:
        """Run every pending (case, epoch); return the eval's result.

        Cancelling it (Ctrl-C, Stop) cancels the runs in flight, marks the eval cancelled
        (resumable) and re-raises.
        """
        check_cassettes(self.manifest, self.pending())
        self.folder.claim(self.manifest)
        self.manifest.stopped = ""
        plan = self.plan()
        self.planned = plan.items  # type: ignore[assignment]
        if progress is not None:
            progress.eval_started(self)
        writer = ArtifactWriter(self.folder.store)
        status = "running"
        try:
            async for event in self.executor.run(plan):
                if isinstance(event, RunStarted):
                    self.in_flight[event.key] = event.run_id
                    self.folder.append_run(event.case, event.epoch, event.run_id, event.variant)
                    if progress is not None:
                        # `variant` only when there is one: a progress written before
                        # variants existed (case, epoch, run_id) still works without them
                        more = {"variant": event.variant} if event.variant else {}
                        progress.run_started(event.case, event.epoch, event.run_id, **more)
                    continue
                # the row's fsync off the loop: the runs in flight go on meanwhile
                await asyncio.to_thread(self._store_outcome, event, writer)
                self.account(event.row)
                self._finished(event.row, progress)
            if self.spec.file.pairwise is not None and not self.stopped:
                from awf_nb.evals.pairwise import judge_pairs

                await judge_pairs(self)
            if (self.stopped or self.over_budget()) and self._unfinished():
                self.stopped = "budget"
            status = "stopped" if self.stopped else "completed"
            self.manifest.stopped = self.stopped if status == "stopped" else ""
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "cancelled"
            raise
        finally:
            if status == "running":  # an error of the eval itself: resumable like a kill
                status = "cancelled"
            self.folder.finish(self.manifest, status)
            if progress is not None:
                progress.eval_finished(self.result())
        return self.result()

    def _unfinished(self) -> bool:
        finished = {row.run_key for row in self.rows}
        return any((case.id, epoch, v) not in finished for case, epoch, v in self.pending_all())

    def pending_all(self) -> Iterator[tuple[Case, int, str]]:
        variants = self.variants
        for epoch in range(1, self.manifest.epochs + 1):
            for case in self.cases:
                for variant in variants:
                    yield case, epoch, variant

    def _store_outcome(self, outcome: RunOutcome, writer: ArtifactWriter) -> None:
        if outcome.artifacts is not None:
            writer.write(outcome.artifacts)
        self.folder.append_result(outcome.row)

    def _finished(self, row: EvalRow, progress: EvalProgress | None) -> None:
        self.in_flight.pop(row.run_key, None)
        self.rows.append(row)
        if progress is not None:
            progress.run_finished(row)

    def result(self) -> EvalResult:
        return EvalResult(
            eval_id=self.eval_id,
            workflow=self.manifest.workflow,
            rows=list(self.rows),
            scorers=self.manifest.scorers,
            epochs=self.manifest.epochs,
            status=self.manifest.status,
            total=self.manifest.total,
            storage=str(self.folder.store.root),
            created_at=self.manifest.created_at,
            finished_at=self.manifest.finished_at,
            stopped=self.manifest.stopped,
            budget=self.manifest.budget,
            rescored_from=self.manifest.rescored_from,
            variants=list(self.manifest.variants),
            pairs=list(self.pairs),
        )


def make_executor(
    name: str, store: Store, *, ray_address: str | None = None, workers: int | None = None
) -> Executor:
    if name != "ray" and (ray_address is not None or workers is not None):
        raise UserError("--ray-address and --workers are options of --executor ray")
    if name == "local":
        return LocalExecutor(store)
    if name == "ray":
        if workers is not None:
            _check_range("--workers", workers, 1, 10_000)
        from awf_nb.evals.ray_executor import RayExecutor  # Ray only when asked for

        return RayExecutor(store, address=ray_address, workers=workers)
    raise UserError(f'unknown executor "{name}" (available: {", ".join(EXECUTORS)})')


def start_eval(
    spec: EvalSpec,
    options: EvalOptions,
    *,
    store: Store,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> EvalRun:
    """A new eval of `spec` (its folder written, nothing run yet)."""
    file = spec.file
    if options.limit is not None and options.limit < 1:
        raise UserError(f"--limit must be at least 1, got {options.limit}")
    epochs = options.epochs if options.epochs is not None else file.epochs
    concurrency = options.concurrency if options.concurrency is not None else file.concurrency
    _check_range("--epochs", epochs, 1, 100)
    _check_range("--concurrency", concurrency, 1, 1000)
    if (options.cassette_mode is None) != (options.cassette_dir is None):
        raise UserError(
            "a cassette mode needs its folder (--record / --replay / --record-missing DIR)"
        )
    budget = check_budget(options.budget if options.budget is not None else file.budget)
    if budget is not None and options.executor == "ray":
        # Ray's executor takes every work item when it starts: a budget could stop nothing
        raise UserError(
            "a budget stops an eval's runs with the local executor only, not --executor ray",
            hint="bound each run with limits.max_cost instead, or run locally",
        )
    executor = make_executor(
        options.executor, store, ray_address=options.ray_address, workers=options.workers
    )
    cases = spec.cases[: options.limit] if options.limit else list(spec.cases)
    variants = selected(list(spec.variants), options.variants)
    check_run_count(len(cases) * max(len(variants), 1), epochs, file.max_runs, spec.label)
    seed = options.seed if options.seed is not None else file.seed
    if seed is None:
        seed = secrets.randbits(32)
    connect = getattr(executor, "connect", None)
    if connect is not None:
        connect()  # a cluster that does not answer leaves no eval behind
    folder = EvalFolder.create(store)
    manifest = Manifest(
        eval_id=folder.eval_id,
        workflow=spec.workflow.name,
        workflow_path=str(spec.workflow.source_path or ""),
        eval_path=str(spec.path or ""),
        base_dir=str(spec.base_dir),
        created_at=now_text(),
        total=len(cases) * epochs * max(len(variants), 1),
        cases=len(cases),
        epochs=epochs,
        concurrency=concurrency,
        seed=seed,
        cassette_mode=options.cassette_mode or "",
        cassette_dir=str(options.cassette_dir.resolve()) if options.cassette_dir else "",
        scorers=[(s.name, s.kind) for s in file.scorers],
        executor=executor.name,
        budget=budget,
        variants=variants,
    )
    resolved = file.model_dump(mode="json", by_alias=True)
    resolved.update(epochs=epochs, concurrency=concurrency, seed=seed)
    resolved["workflow"] = str(spec.workflow.source_path or spec.file.workflow)
    for name, variant in spec.variants.items():
        # where the variant's workflow was read: its relative paths resolve there on resume
        resolved["variants"][name]["workflow"] = str(variant.workflow.source_path or "")
    texts = {name: spec.variants[name].workflow.source_text for name in variants}
    folder.write_start(manifest, resolved, spec.workflow.source_text, cases, texts)
    run = EvalRun(spec, folder, manifest, cases, [], cwd=_cwd(cwd), env=env, executor=executor)
    run.otlp, run.trace_content = options.otlp, options.trace_content
    return run


def resume_eval(
    eval_id: str,
    *,
    store: Store,
    concurrency: int | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    budget: float | None = None,
) -> EvalRun:
    """The eval `eval_id`, to finish: exactly the (case, epoch) pairs without a row run.
    `budget` replaces the eval's (an eval stopped at its budget needs a larger one)."""
    from awf_nb.evals.model import EvalFile
    from awf_nb.workflow.loader import load_text

    folder = EvalFolder.open(store, eval_id)
    manifest = folder.manifest()
    alive = manifest.pid and manifest.pid != os.getpid()
    if alive and manifest.shown_status() == "running":
        raise UserError(
            f"eval {folder.eval_id} is still running (process {manifest.pid}); "
            "stop it first, or wait for it to finish"
        )
    if concurrency is not None:
        _check_range("--concurrency", concurrency, 1, 1000)
        manifest.concurrency = concurrency
    file = EvalFile.model_validate(folder.resolved())
    path = Path(manifest.workflow_path) if manifest.workflow_path else None
    workflow = load_text(
        folder.workflow_text(),
        file=manifest.workflow_path or "<workflow>",
        base_dir=path.parent if path else Path(manifest.base_dir),
        path=path,
    )
    cases = folder.cases()
    check_run_count(
        len(cases) * max(len(manifest.variants), 1),
        manifest.epochs,
        file.max_runs,
        f"eval {folder.eval_id}",
    )
    spec = EvalSpec(
        file=file,
        workflow=workflow,
        cases=cases,
        base_dir=Path(manifest.base_dir),
        label=manifest.eval_path or "<eval>",
        path=Path(manifest.eval_path) if manifest.eval_path else None,
        variants=stored_variants(folder, manifest, file),
    )
    if manifest.rescored_from:
        raise UserError(
            f"eval {folder.eval_id} scores the runs of eval {manifest.rescored_from} again: "
            "it has no runs of its own to resume",
            hint=f"resume eval {manifest.rescored_from}, then rescore it again",
        )
    if budget is not None:
        manifest.budget = check_budget(budget)
    if manifest.budget is not None and manifest.executor == "ray":
        raise UserError(
            "a budget stops an eval's runs with the local executor only, not --executor ray"
        )
    executor = make_executor(manifest.executor, store, ray_address=ray_address, workers=workers)
    run = EvalRun(
        spec, folder, manifest, cases, folder.rows(), cwd=_cwd(cwd), env=env, executor=executor
    )
    if run.over_budget() and run.pending_count():
        from awf_nb.evals.pricing import usd

        raise UserError(
            f"eval {folder.eval_id} has spent {usd(run.spent)} of its budget of "
            f"{usd(manifest.budget)}: nothing more would run",
            hint=f"give a larger budget: awf eval --resume {folder.eval_id} --budget USD",
        )
    return run


def check_budget(budget: float | None) -> float | None:
    """A budget in USD: a positive, finite number (or None: no budget)."""
    import math

    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise UserError(f"--budget must be a number of USD, got {budget!r}")
    if not math.isfinite(budget) or budget <= 0:
        raise UserError(f"--budget must be a positive number of USD, got {budget!r}")
    return float(budget)


def check_run_count(cases: int, epochs: int, max_runs: int, where: str) -> None:
    """An eval plans at most `max_runs` runs (default `DEFAULT_MAX_RUNS`, a million):
    beyond, it is refused before anything is written or run."""
    runs = cases * epochs
    if runs > max_runs:
        raise UserError(
            f"{where}: {cases} cases x {epochs} epochs is {runs} runs, more than the "
            f"{max_runs} an eval may plan (max_runs)",
            hint="run fewer cases (--limit N) or epochs (--epochs N), "
            "or raise max_runs in the eval file",
        )


def _cwd(cwd: Path | None) -> Path:
    return (cwd or Path.cwd()).resolve()


def _check_range(flag: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{flag} must be a whole number from {low} to {high}, got {value!r}")
