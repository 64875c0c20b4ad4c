"""The executor seam: who runs the (case, epoch) work items of an eval, and where.

The driver (`driver.py`) plans the work, hands it to an `Executor`, and writes each
finished run's row as the executor reports it. An executor is small:

    class Executor(Protocol):
        def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]
        def describe(self, concurrency: int) -> str  # "4 at a time", for the progress

It yields `RunStarted` when a run has its id and `RunOutcome` when it has finished and
been scored, in the order things happen. Everything in a `WorkItem`, `RunStarted` and
`RunOutcome` is plain, picklable data, so an executor may run the items elsewhere:

- `LocalExecutor` (this module) keeps `concurrency` runs in flight on the caller's event
  loop — a fixed number of worker tasks pulling items, no thread per run — and writes the
  runs into the driver's own store, so its outcomes carry no artifacts.
- An executor on other machines (`RayExecutor`, ray_executor.py) runs the work items
  (`run_item`, as `LocalExecutor` does) on each worker against a store of the worker's
  own, and ships each finished run back as `RunArtifacts` (state
  and transcript, already masked) in its `RunOutcome`; the driver's `ArtifactWriter`
  puts them into the driver's store, so `awf status RUN_ID` works there as for local runs.

Cancelling the iteration (Ctrl-C, Stop) cancels the runs in flight: each is saved as
cancelled by the engine, and no row is written for it, so `--resume` reruns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from awf_nb.engine.tool_slots import ToolProcessBound, bounding, default_tool_processes
from awf_nb.errors import AwfError
from awf_nb.evals.datasets import Case
from awf_nb.evals.model import ScorerSpec
from awf_nb.evals.results import EvalRow
from awf_nb.evals.run_setup import CassetteUse

if TYPE_CHECKING:
    from awf_nb.engine.partner import SimulatedUser
    from awf_nb.store import Store
    from awf_nb.workflow.model import Workflow


@dataclass(frozen=True)
class WorkItem:
    """One (case, epoch) to run: everything resolved, nothing left to look up."""

    case: Case
    epoch: int
    inputs: Mapping[str, Any] = field(default_factory=dict)
    user: SimulatedUser | None = None
    cassette: CassetteUse | None = None
    seed: int | None = None
    # Why the run cannot start (an input template that does not render): reported as the
    # row's error, without a run.
    setup_error: str = ""
    variant: str = ""  # the eval's variant ("" when it has none)

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.case.id, self.epoch, self.variant)


@dataclass
class EvalPlan:
    """The work of one eval (or of its resumption): the workflow, scorers and items."""

    workflow: Workflow  # with the eval's limits applied
    scorers: list[ScorerSpec]
    # Sized and iterable; the driver's builds each item only as a worker takes it.
    items: Collection[WorkItem]
    concurrency: int
    yes: bool = False
    cwd: Path = field(default_factory=Path.cwd)
    base_dir: Path = field(default_factory=Path.cwd)
    env: Mapping[str, str] | None = None
    eval_id: str = ""  # on each run's trace, with its case and epoch
    otlp: str | None = None
    trace_content: bool = False
    # Cost: the eval's `pricing:` and `limits.max_cost` (USD per run).
    pricing: Mapping[str, Any] = field(default_factory=dict)
    max_cost: float | None = None
    # The most tool processes alive at once across the eval's runs in one process (None:
    # `engine.tool_slots.default_tool_processes()`); each executor process has its own bound.
    max_tool_processes: int | None = None
    # Told of each finished row as soon as it is scored, before the next item is taken
    # (the eval's `budget` stops handing out items on it); not pickled to other machines.
    on_row: Callable[[EvalRow], None] | None = None
    # each variant's workflow (limits applied), by name; an item of variant "" runs `workflow`
    variant_workflows: Mapping[str, Workflow] = field(default_factory=dict)

    def workflow_of(self, item: WorkItem) -> Workflow:
        return self.variant_workflows[item.variant] if item.variant else self.workflow

    def workflows(self) -> list[Workflow]:
        """Every workflow the plan runs."""
        return [self.workflow, *self.variant_workflows.values()]


@dataclass(frozen=True)
class RunStarted:
    """A work item's run exists (its id is in the store)."""

    case: str
    epoch: int
    run_id: str
    variant: str = ""

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.case, self.epoch, self.variant)


@dataclass(frozen=True)
class RunArtifacts:
    """A finished run as files, for a store that did not see it run: the state file's
    JSON, the transcript's lines and the workflow text (all masked but the workflow,
    which the store keeps private)."""

    run_id: str
    state_json: bytes
    transcript: bytes
    workflow_source: str


@dataclass(frozen=True)
class RunOutcome:
    """A work item finished and scored: its row, and its run's files when the run was
    stored elsewhere (None: already in the driver's store)."""

    row: EvalRow
    artifacts: RunArtifacts | None = None


class Executor(Protocol):
    """Runs an eval's work items; see the module docstring."""

    name: str

    def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]: ...

    def describe(self, concurrency: int) -> str:
        """Where and how many runs are in flight, for the progress display."""
        ...


class ArtifactWriter:
    """The driver's side of a remote run: its files written into the driver's store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, artifacts: RunArtifacts) -> None:
        from awf_nb.engine.state import RunState
        from awf_nb.store import PRIVATE_FILE, TRANSCRIPT_FILE

        state = RunState.from_json(artifacts.state_json)
        state.workflow_source = artifacts.workflow_source
        run_dir = self.store.run_dir(artifacts.run_id)
        self.store._ensure_dir(run_dir)
        path = run_dir / TRANSCRIPT_FILE
        path.write_bytes(artifacts.transcript)
        path.chmod(PRIVATE_FILE)
        self.store.save_state(state)
        self.store.record_run(state)


def collect_artifacts(store: Store, run_id: str) -> RunArtifacts:
    """A finished run of `store` as `RunArtifacts` (what a remote worker ships back)."""
    state = store.load_state(run_id)
    try:
        transcript = store.transcript_path(run_id).read_bytes()
    except FileNotFoundError:
        transcript = b""
    return RunArtifacts(
        run_id=run_id,
        state_json=state.to_json(indent=None).encode(),
        transcript=transcript,
        workflow_source=state.workflow_source,
    )


class LocalExecutor:
    """`concurrency` runs in flight on the running event loop, written to `store`.

    The runs go to an `EvalRunStore` on the same storage root: their checkpoints are
    written by a thread of its own, not on the event loop every conversation shares (see
    run_store.py). Each run is settled (its files on the disk) before its row is reported.
    """

    name = "local"

    def __init__(self, store: Store | None) -> None:
        self.store = store

    def describe(self, concurrency: int) -> str:
        return f"{concurrency} at a time"

    async def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        from awf_nb.evals.run_store import EvalRunStore

        events: asyncio.Queue[RunStarted | RunOutcome | None] = asyncio.Queue()
        items: Iterator[WorkItem] = iter(plan.items)
        store = EvalRunStore(self.store.root) if self.store is not None else None
        bound = tool_process_bound(plan)  # one for all the runs of this process

        async def worker() -> None:
            for item in items:  # shared: each worker takes the next item left
                with bounding(bound):
                    outcome = await run_item(plan, item, store, events.put_nowait)
                if plan.on_row is not None:
                    plan.on_row(outcome.row)
                events.put_nowait(outcome)
                # an item that fails its set-up never awaits: yield anyway, so a cancel
                # (Ctrl-C, SIGTERM) is never held back by a long run of them
                await asyncio.sleep(0)

        workers = [
            asyncio.create_task(worker(), name=f"awf-eval-worker-{n}")
            for n in range(min(plan.concurrency, len(plan.items)))
        ]
        done = asyncio.gather(*workers)
        done.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            await done  # a worker's own failure (a bug, a store that cannot write) is raised
        finally:
            for task in workers:
                task.cancel()
            if workers:
                # every run's own clean-up (its cancelled state saved, its commands
                # stopped) ends before the store is closed: not just the first to finish
                await asyncio.wait(workers)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await done
            if store is not None:
                # what the cancelled runs saved last is written before the eval says so
                await asyncio.shield(asyncio.to_thread(store.close))


def tool_process_bound(plan: EvalPlan) -> ToolProcessBound:
    """The bound on tool processes the runs of `plan` share in one process."""
    if plan.max_tool_processes is not None:
        return ToolProcessBound(plan.max_tool_processes)
    return ToolProcessBound(default_tool_processes())


async def run_item(plan: EvalPlan, item: WorkItem, store: Store | None, started: Any) -> RunOutcome:
    """Run one work item to its scored row. Errors of the run, its set-up or its scorers
    are the row's; only cancellation propagates."""
    from awf_nb.evals import run_setup
    from awf_nb.evals.scorers import FinishedRun, ScoringContext

    row = EvalRow(case=item.case.id, epoch=item.epoch, seed=item.seed, variant=item.variant)
    workflow = plan.workflow_of(item)
    if item.setup_error:
        row.error, row.error_kind = item.setup_error, "setup"
        return RunOutcome(row)
    # The run's commands (and templates, as `.env`) know which case and epoch they serve.
    env = run_setup.environment(plan.env)
    env.update(AWF_EVAL_CASE=item.case.id, AWF_EVAL_EPOCH=str(item.epoch))
    if item.variant:
        env["AWF_EVAL_VARIANT"] = item.variant
    if item.seed is not None:
        env["AWF_EVAL_SEED"] = str(item.seed)
    from awf_nb.evals.pricing import model_of, run_cost, turn_cost
    from awf_nb.traces import TraceCost

    user = None
    if item.user is not None:
        user = (item.user.provider, model_of(item.user.options))
    cost_limit = None
    if plan.max_cost is not None and plan.pricing:
        from awf_nb.engine.limits import CostLimit

        def spent(state: Any) -> float | None:
            return run_cost(plan.pricing, workflow, state, user)

        cost_limit = CostLimit(plan.max_cost, spent)
    # The run's spans carry what it cost, priced as the eval's table prices it.
    trace_cost = TraceCost(
        turn=lambda step, tokens_in, tokens_out: turn_cost(
            plan.pricing, workflow, step, tokens_in, tokens_out
        ),
        run=lambda state: run_cost(plan.pricing, workflow, state, user),
    )
    try:
        prepared = run_setup.prepare_case_run(
            workflow,
            item.inputs,
            store=store,
            user=item.user,
            replies=item.case.replies,
            cassette=item.cassette,
            seed=item.seed,
            yes=plan.yes,
            cwd=plan.cwd,
            env=env,
            otlp=plan.otlp,
            trace_content=plan.trace_content,
            trace_tags={
                "awf.eval.id": plan.eval_id,
                "awf.eval.case": item.case.id,
                "awf.eval.epoch": item.epoch,
                **({"awf.eval.variant": item.variant} if item.variant else {}),
            },
            trace_cost=trace_cost,
            cost_limit=cost_limit,
        )
    except AwfError as exc:
        row.error = exc.message
        row.error_kind = "cassette" if "cassette" in type(exc).__name__.lower() else "setup"
        return RunOutcome(row)
    row.run_id = prepared.run_id
    started(RunStarted(item.case.id, item.epoch, prepared.run_id, item.variant))
    began = time.monotonic()
    state = (await prepared.run()).state
    seconds = time.monotonic() - began
    cost = run_cost(plan.pricing, workflow, state, user)
    finished = FinishedRun.of(
        item.case, item.epoch, state, prepared.runner.masker, seconds=seconds, cost=cost
    )
    row.status = state.status
    row.stopped_by = finished.stopped_by
    row.turns = finished.turns
    row.tokens = state.total_tokens
    row.cost = cost
    row.error = state.error
    if state.status != "completed":
        row.error_kind = _run_error_kind(state.error)
    providers = run_setup.scoring_providers(prepared, item.seed)
    ctx = ScoringContext(
        providers=providers, cwd=plan.cwd, env=run_setup.environment(plan.env),
        base_dir=plan.base_dir, pricing=plan.pricing,
    )  # fmt: skip
    try:
        await score_row(row, plan.scorers, finished, ctx)
    finally:
        await providers.aclose()
    if store is not None:
        await _settle(store, prepared.run_id)
    row.seconds = time.monotonic() - began
    unused = run_setup.unused_recording(prepared)
    if unused and row.error_kind != "cassette":
        # only when the run itself met no mismatch: a turn that did not match (the prompt
        # differs, …) also leaves the rest unused, and its own error says why
        row.error = (
            f"the replay used fewer recorded turns than the cassette holds (not used: "
            f"{unused}): the run no longer goes the way it was recorded; record it again"
        )
        row.error_kind = "cassette"
    decide(row, plan.scorers, plan.max_cost)
    return RunOutcome(row)


async def score_row(row: EvalRow, scorers: list[ScorerSpec], finished: Any, ctx: Any) -> None:
    """Every scorer's verdict on the finished run, into `row` (judges' tokens and cost
    added up)."""
    from awf_nb.evals.pricing import add
    from awf_nb.evals.scorers import score

    for scorer in scorers:
        row.scores[scorer.name] = value = await score(scorer, finished, ctx)
        row.judge_tokens += value.tokens
        row.judge_cost = add(row.judge_cost, value.cost)


def decide(row: EvalRow, scorers: list[ScorerSpec], max_cost: float | None = None) -> None:
    """Whether the scored `row` passed: every scorer passed (or, without scorers, the run
    completed); undecided (None) when a scorer erred, the cassette did not match, the
    simulated user failed (not the workflow: the trial says nothing of it), or the run cost
    more than `max_cost`."""
    from awf_nb.evals.pricing import usd

    if row.error_kind in ("cassette", "simulator"):
        row.passed = None
        return
    over = max_cost is not None and row.cost is not None and row.cost > max_cost
    if over and not row.error_kind:  # the last turn went past it (else the run stopped)
        assert max_cost is not None and row.cost is not None
        row.passed = None
        row.error_kind = "limit"
        row.error = (
            f"limits.max_cost reached: the run cost {usd(row.cost)}, more than {usd(max_cost)}"
        )
        return
    errored = [name for name, value in row.scores.items() if value.passed is None]
    if errored:
        row.passed = None
        if not row.error_kind:
            row.error_kind = "scorer"
        if not row.error:
            first = row.scores[errored[0]]
            row.error = f"scorer {errored[0]}: {first.error}"
    elif scorers:
        row.passed = all(value.passed for value in row.scores.values())
    else:
        row.passed = row.status == "completed"


async def _settle(store: Store, run_id: str) -> None:
    """The run's files on the disk before its row is reported."""
    from awf_nb.evals.run_store import EvalRunStore

    if isinstance(store, EvalRunStore):
        await store.asettle(run_id)
    else:
        await asyncio.to_thread(store.settle, run_id)


def _run_error_kind(error: str) -> str:
    """What kind of error ended a run: the simulated user's, a limit, a cassette that
    does not match, or the run's own failure."""
    if "simulated user:" in error:
        return "simulator"  # the simulated user failed, not the workflow
    if "limits." in error and "reached" in error:
        return "limit"
    if "cassette" in error:
        return "cassette"
    return "run"
