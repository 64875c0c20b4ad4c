"""`--executor ray`: an eval's (case, epoch) work items run by Ray workers.

Imported only when an eval asks for `executor="ray"` (Ray is the optional extra
`awf-nb[ray]`). The driver connects to a Ray cluster (`ray_address`, else Ray's own default:
`RAY_ADDRESS`, or the cluster started on this machine with `ray start`) and starts
`workers` actors, one per worker process, each holding one CPU of the cluster. Each actor
runs work items the way `LocalExecutor` does (`executor.run_item`, the same function),
`concurrency` of them in flight on its own event loop, against a run store of its own; a
provider that loads a model (the bundled `local` one) loads it once per actor, since the
actor's process lives as long as the eval.

What travels with the job:
- the plan (workflow, scorers, limits) once per eval through Ray's object store, the
  dataset rows in each work item, the working directory (the workflow's files and whatever
  its commands read) as Ray's runtime environment `working_dir`, without the driver's
  storage folder;
- replayed cassettes as bytes in the work item; recorded ones come back as bytes and are
  written where a local eval writes them;
- of the driver's environment, only the variables the workflow names in its `env:` list
  (each worker's own environment supplies the rest, PATH and the like).

What comes back, per run as it finishes (an actor method streaming `RunStarted` then
`RunOutcome`): the row and the run's files (`RunArtifacts`), masked with the run's own
secrets and again with every secret-named variable that travelled; the driver writes them
into its store, so `awf status RUN_ID`, `awf eval-show` and `--resume` work as for a local
eval.

A worker that dies (its process killed, its node lost) loses only its runs in flight: Ray
restarts the actor (up to `MAX_ACTOR_RESTARTS` times) and each of those runs is tried
again, at most `MAX_ITEM_RETRIES` times; after that its row is an error of kind "worker".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import UserError
from awf_nb.evals.executor import EvalPlan, RunArtifacts, RunOutcome, RunStarted, WorkItem
from awf_nb.evals.results import EvalRow
from awf_nb.evals.run_setup import CassetteUse

if TYPE_CHECKING:
    from awf_nb.store import Store

INSTALL_HINT = "install it with: pip install 'awf-nb[ray]'"
# How often a work item whose worker died is run again, and how often a dead worker is
# restarted by Ray, before the item's row says so.
MAX_ITEM_RETRIES = 1
MAX_ACTOR_RESTARTS = 3
# How long the driver waits for the workers to start (a cluster without free CPUs would
# otherwise leave them pending for ever).
WORKER_START_TIMEOUT = 120.0
# Ray's own limit on a working directory it uploads is 500 MiB (larger is its error).
WORKING_DIR_EXCLUDES = [".git", ".venv", "__pycache__", "node_modules"]


def import_ray() -> Any:
    """The `ray` module, or the error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise UserError(
            "--executor ray needs Ray, which is not installed", hint=INSTALL_HINT
        ) from None
    return ray


@dataclass(frozen=True)
class RemoteItem:
    """A work item as it travels: the cassette to replay as bytes (the worker's disk is
    not the driver's)."""

    item: WorkItem
    replay_bytes: bytes | None = None


@dataclass(frozen=True)
class RemoteOutcome:
    """A finished work item as it comes back: the outcome, and the bytes of the cassette
    it recorded (written by the driver where a local eval would)."""

    outcome: RunOutcome
    recorded: bytes | None = None


def travelling_env(plan: EvalPlan) -> dict[str, str]:
    """The driver's variables that travel with the job: those the workflow names."""
    source = os.environ if plan.env is None else plan.env
    return {name: source[name] for name in plan.workflow.env if name in source}


def relocate(path: Path | None, old: Path, new: Path) -> Path | None:
    """`path` under the driver's working directory `old`, as the same file under the
    worker's `new`; a path elsewhere stays as it is (shared file systems)."""
    if path is None:
        return None
    try:
        return new / Path(path).relative_to(old)
    except ValueError:
        return path


class CaseWorker:
    """A Ray actor: runs work items, `concurrency` at a time, in its own store."""

    def __init__(self, plan_ref: Any, driver_cwd: str, env: dict[str, str]) -> None:
        from awf_nb.evals.run_store import EvalRunStore
        from awf_nb.secrets import Masker, is_secret_name

        self.dir = Path(tempfile.mkdtemp(prefix="awf-ray-worker-"))
        self.store = EvalRunStore(self.dir / "storage")
        here, there = Path.cwd(), Path(driver_cwd)
        plan: EvalPlan = plan_ref
        workflow = plan.workflow.model_copy(
            update={
                "source_path": relocate(plan.workflow.source_path, there, here),
                "source_dir": relocate(plan.workflow.source_dir, there, here),
            }
        )
        self.plan = replace(
            plan,
            workflow=workflow,
            items=[],
            cwd=here,
            base_dir=relocate(plan.base_dir, there, here) or here,
            env={**os.environ, **env},
        )
        self.masker = Masker(value for name, value in env.items() if is_secret_name(name))
        self.slots = asyncio.Semaphore(plan.concurrency)

    def pid(self) -> int:
        return os.getpid()

    async def run(self, remote: RemoteItem) -> AsyncIterator[RunStarted | RemoteOutcome]:
        """Streams the item's `RunStarted` (when it has a run), then its outcome."""
        from awf_nb.evals.executor import collect_artifacts, run_item

        async with self.slots:
            item = remote.item
            cassette = item.cassette
            if cassette is not None:
                local = self.dir / "cassettes" / cassette.path.name
                local.parent.mkdir(parents=True, exist_ok=True)
                local.unlink(missing_ok=True)
                if remote.replay_bytes is not None:
                    local.write_bytes(remote.replay_bytes)
                item = replace(item, cassette=CassetteUse(cassette.mode, local))
            events: asyncio.Queue[RunStarted] = asyncio.Queue()
            task = asyncio.create_task(run_item(self.plan, item, self.store, events.put_nowait))
            try:
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
                outcome = await task
            finally:
                task.cancel()
            artifacts = None
            if outcome.row.run_id:
                await asyncio.to_thread(self.store.settle, outcome.row.run_id)
                artifacts = self._masked(collect_artifacts(self.store, outcome.row.run_id))
            recorded = None
            if item.cassette is not None and item.cassette.mode == "record":
                path = item.cassette.path
                recorded = path.read_bytes() if path.is_file() else None
            row = self.masker.mask_data(outcome.row) if self.masker else outcome.row
            yield RemoteOutcome(RunOutcome(row, artifacts), recorded)

    def _masked(self, artifacts: RunArtifacts) -> RunArtifacts:
        if not self.masker:
            return artifacts
        return replace(
            artifacts,
            state_json=self.masker.mask(artifacts.state_json.decode()).encode(),
            transcript=self.masker.mask(artifacts.transcript.decode()).encode(),
        )


class RayExecutor:
    """Work items on a Ray cluster's workers; see the module docstring."""

    name = "ray"

    def __init__(
        self, store: Store | None, *, address: str | None = None, workers: int | None = None
    ) -> None:
        self.ray = import_ray()
        self.store = store
        self.address = address
        self.workers = workers
        self.actors: list[Any] = []  # while an eval runs (tests kill one by its pid)

    def _connect(self, plan: EvalPlan) -> None:
        ray = self.ray
        excludes = list(WORKING_DIR_EXCLUDES)
        if self.store is not None:
            with contextlib.suppress(ValueError):
                excludes.append(str(Path(self.store.root).resolve().relative_to(plan.cwd)))
        runtime_env = {"working_dir": str(plan.cwd), "excludes": excludes}
        if ray.is_initialized():
            ray.shutdown()
        try:
            ray.init(
                address=self.address,
                runtime_env=runtime_env,
                logging_level="WARNING",
                log_to_driver=False,
                configure_logging=False,
            )
        except ConnectionError as exc:
            raise UserError(
                f"cannot connect to the Ray cluster at {self.address or 'its default address'}:"
                f" {exc}",
                hint="start one with `ray start --head`, or pass --ray-address HOST:PORT",
            ) from None

    def _worker_count(self) -> int:
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise UserError("the Ray cluster has no CPU to run a worker on")
        workers = self.workers if self.workers is not None else cpus
        if not 1 <= workers <= cpus:
            raise UserError(
                f"--workers must be a whole number from 1 to {cpus} (the cluster's CPUs), "
                f"got {workers}"
            )
        return workers

    async def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        if not plan.items:
            return
        ray = self.ray
        # on this thread: Ray's driver set-up does not complete from a thread of its own
        self._connect(plan)
        try:
            count = self._worker_count()
            plan_ref = ray.put(replace(plan, items=[]))
            remote_class = ray.remote(
                num_cpus=1, max_restarts=MAX_ACTOR_RESTARTS, max_task_retries=0
            )(CaseWorker)
            env = travelling_env(plan)
            self.actors = [remote_class.remote(plan_ref, str(plan.cwd), env) for _ in range(count)]
            pids = [actor.pid.remote() for actor in self.actors]
            try:
                await asyncio.wait_for(asyncio.gather(*pids), WORKER_START_TIMEOUT)
            except TimeoutError:
                raise UserError(
                    f"the Ray workers did not start within {WORKER_START_TIMEOUT:.0f} s",
                    hint="check the cluster with `ray status`",
                ) from None
            async for event in self._dispatch(plan):
                yield event
        finally:
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
            self.actors = []
            ray.shutdown()

    async def _dispatch(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        events: asyncio.Queue[RunStarted | RunOutcome | None] = asyncio.Queue()
        items: Iterator[WorkItem] = iter(plan.items)
        lost = _worker_errors(self.ray)

        async def feeder(actor: Any) -> None:
            for item in items:  # shared: each feeder takes the next item left
                for tries in range(1, MAX_ITEM_RETRIES + 2):
                    try:
                        await self._one(actor, item, events.put_nowait)
                        break
                    except lost as exc:
                        # the run in flight is lost with its worker: run it again (Ray
                        # restarts the worker), or say so in its row
                        if tries <= MAX_ITEM_RETRIES:
                            continue
                        row = EvalRow(case=item.case.id, epoch=item.epoch, seed=item.seed)
                        row.error = (
                            f"the Ray worker running it died {tries} times "
                            f"(retries: {MAX_ITEM_RETRIES}): {_first_line(exc)}"
                        )
                        row.error_kind = "worker"
                        events.put_nowait(RunOutcome(row))

        feeders = [
            asyncio.create_task(feeder(actor), name=f"awf-ray-feeder-{n}")
            for n, actor in enumerate(self.actors)
            for _ in range(plan.concurrency)
        ]
        done = asyncio.gather(*feeders)
        done.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            await done
        finally:
            for task in feeders:
                task.cancel()
            await asyncio.wait(feeders)

    async def _one(self, actor: Any, item: WorkItem, put: Any) -> None:
        replay = None
        if item.cassette is not None and item.cassette.mode == "replay":
            replay = await asyncio.to_thread(item.cassette.path.read_bytes)
        stream = actor.run.options(num_returns="streaming").remote(RemoteItem(item, replay))
        try:
            async for ref in stream:
                event = await ref
                if isinstance(event, RunStarted):
                    put(event)
                    continue
                if event.recorded is not None and item.cassette is not None:
                    await asyncio.to_thread(_write_file, item.cassette.path, event.recorded)
                put(event.outcome)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                self.ray.cancel(stream)
            raise


def _worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a call whose worker died or is being restarted."""
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError")
    return tuple(getattr(ray.exceptions, name) for name in names if hasattr(ray.exceptions, name))


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
