"""`--executor ray`: an eval's (case, epoch) work items run by Ray workers.

Imported only when an eval asks for `executor="ray"` (Ray is the optional extra
`awf-nb[ray]`). The driver connects to a Ray cluster (`ray_address`, else `RAY_ADDRESS`,
else the cluster started on this machine with `ray start`; never one of its own) and starts
`workers` actors, one per worker process, each holding one CPU of the cluster. Each actor
runs work items the way `LocalExecutor` does (`executor.run_item`, the same function),
`concurrency` of them in flight on its own event loop, against a run store of its own; a
provider that loads a model (the bundled `local` one) loads it once per actor, since the
actor's process lives as long as the eval.

Why actors: a Ray task runs one thing at a time in its process, so a task per run needs a
process per run in flight (each importing awf-nb, each loading a `local` model), and a task
per batch sends its runs back only when the whole batch ends; an actor keeps `concurrency`
runs in flight on one loop and streams each back as it ends
(`benchmarks/ray_tasks_vs_actors.py` measures the three; docs/evaluations.md has figures).

What travels with the job (docs/evaluations.md says the same to users):
- the plan (workflow, scorers, limits; not the driver's environment) once per worker, as
  its actor's argument; the dataset rows in each work item, with the eval file's templates
  (`inputs`, `user`) rendered on the driver: a value they take from the driver's
  environment (`{{.env.X}}`) travels inside the work item;
- the working directory (the workflow's files and whatever its commands read) as one zip
  in Ray's object store (`workdir.py`), without the driver's storage folder, `.git`-like
  folders and files whose names look secret (`.env*`, `*.pem`, `secrets/`, …) unless
  listed in `AWF_RAY_FILES`; each worker unpacks it into a private folder of its own
  (0700) and removes it when the eval ends; awf-nb itself travels as Ray's `py_modules`;
- replayed cassettes as bytes in the work item; recorded ones come back as bytes and are
  written where a local eval writes them;
- of the driver's environment, only the variables the workflow names in its `env:` list
  (each worker's own environment supplies the rest, PATH and the like).

What comes back, per run as it finishes (an actor method streaming `RunStarted` then
`RunOutcome`): the row and the run's files (`RunArtifacts`), masked with the run's own
secrets and again on the worker with every secret value the driver's environment gave it
(secret-named variables that travelled, and those the work item's rendered templates
hold); the driver checks that each answer is the work item's (else the row is an error of
kind "worker") and writes it into its store, so `awf status RUN_ID`, `awf eval-show` and
`--resume` work as for a local eval.

A worker that dies (its process killed, its node lost) loses only its runs in flight: Ray
restarts the actor (up to `MAX_ACTOR_RESTARTS` times) and each of those runs is tried
again, by any worker, at most `MAX_ITEM_RETRIES` times (a warning names it); after that,
or when no worker is left alive, its row is an error of kind "worker".

Connecting (`connect`, before the eval's folder is made): at most `CONNECT_TIMEOUT` for
the cluster's address to answer as a Ray cluster (Ray's own retries at an address that
does not answer last many minutes); Ctrl-C and SIGTERM end the wait at once. A loopback
address (`127.0.0.1`, `localhost`, `::1`) keeps the driver on loopback: Ray would
otherwise swap it for the machine's own network address, where a cluster started for
loopback only does not listen.

A cluster started with `ray start` uses Ray's token authentication unless told
otherwise; a driver that connects to it by address needs `RAY_AUTH_MODE=token` and the
cluster's token (`RAY_AUTH_TOKEN`, or the file `~/.ray/auth_token`), or Ray refuses it
(after about 20 s of retries). awf-nb itself travels with the job (`py_modules`), so the
workers run the driver's version; its dependencies must be installed on every node.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.summary import format_duration
from awf_nb.errors import UserError
from awf_nb.evals import executor
from awf_nb.evals.executor import EvalPlan, RunArtifacts, RunOutcome, RunStarted, WorkItem
from awf_nb.evals.ray_connect import _first_line
from awf_nb.evals.results import EvalRow
from awf_nb.evals.run_setup import CassetteUse

if TYPE_CHECKING:
    from awf_nb.secrets import Masker
    from awf_nb.store import Store

log = logging.getLogger(__name__)

INSTALL_HINT = "install it with: pip install 'awf-nb[ray]'"
# How often a work item whose worker died is run again, and how often a dead worker is
# restarted by Ray, before the item's row says so.
MAX_ITEM_RETRIES = 1
MAX_ACTOR_RESTARTS = 3
# How long the driver waits for the workers to start (a cluster without free CPUs would
# otherwise leave them pending for ever).
WORKER_START_TIMEOUT = 120.0
# How often the driver asks a restarting worker whether it is up.
RESTART_POLL = 0.5
# How long the driver waits for the workers to remove their folders at the end.
WORKER_CLOSE_TIMEOUT = 30.0


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
    # The secret values of the driver's environment the item's rendered templates hold
    # (an `{{.env.API_TOKEN}}` input): the worker masks them in all it sends back.
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteOutcome:
    """A finished work item as it comes back: the outcome, and the bytes of the cassette
    it recorded (written by the driver where a local eval would)."""

    outcome: RunOutcome
    recorded: bytes | None = None


def travelling_env(plan: EvalPlan) -> dict[str, str]:
    """The driver's variables that travel with the job: those the workflow names."""
    source = os.environ if plan.env is None else plan.env
    names = {name for workflow in plan.workflows() for name in workflow.env}
    return {name: source[name] for name in sorted(names) if name in source}


def item_secrets(item: WorkItem, env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret values of the driver's environment `env` (secret-named variables) that
    `item` carries in its rendered inputs or simulated user, and the secret options
    (`api_key`, secret headers) of that user: what the run on a worker must mask."""
    from awf_nb.secrets import Masker, is_secret_name, option_secrets

    texts = list(_strings(item.inputs))
    if item.user is not None:
        texts += [item.user.persona, item.user.provider, *_strings(item.user.options)]
    found = {
        value
        for name, value in env.items()
        if value and is_secret_name(name) and any(value in text for text in texts)
    }
    if item.user is not None:
        found.update(option_secrets(item.user.options))
    return Masker(found).secrets


def _strings(obj: Any) -> list[str]:
    """Every string in nested data (mappings, lists, tuples)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, Mapping):
        return [text for value in obj.values() for text in _strings(value)]
    if isinstance(obj, list | tuple):
        return [text for value in obj for text in _strings(value)]
    return []


class CaseWorker:
    """A Ray actor: runs work items, `concurrency` at a time, in its own store."""

    def __init__(
        self, plan: EvalPlan, driver_cwd: str, env: dict[str, str], workdir: bytes
    ) -> None:
        from awf_nb.evals import workdir as workdirs
        from awf_nb.evals.run_store import EvalRunStore
        from awf_nb.evals.workdir import relocate, relocated
        from awf_nb.secrets import Masker, is_secret_name

        workdirs.sweep()  # what killed workers left (this one's predecessor, say)
        self.dir = workdirs.worker_folder()
        here = self.dir / "work"
        workdirs.unpack(workdir, here)
        os.chdir(here)  # the actor's own process: relative paths are the job's
        self.store = EvalRunStore(self.dir / "storage")
        there = Path(driver_cwd)
        variants = plan.variant_workflows
        self.plan = replace(
            plan,
            workflow=relocated(plan.workflow, there, here),
            variant_workflows={name: relocated(w, there, here) for name, w in variants.items()},
            items=[],
            cwd=here,
            base_dir=relocate(plan.base_dir, there, here) or here,
            env={**os.environ, **env},
        )
        self.masker = Masker(value for name, value in env.items() if is_secret_name(name))
        self.slots = asyncio.Semaphore(plan.concurrency)
        # the eval's bound on tool processes, for this worker's runs together
        self.tool_processes = executor.tool_process_bound(plan)

    def pid(self) -> int:
        """The worker's process id (a restarted worker has a new one)."""
        return os.getpid()

    def close(self) -> None:
        """Close the worker's store and remove its folder, the working directory with it
        (its runs are in the driver's store by now)."""
        from awf_nb.evals import workdir as workdirs

        self.store.close()
        os.chdir(tempfile.gettempdir())  # not inside the folder being removed
        shutil.rmtree(self.dir, ignore_errors=True)
        workdirs.sweep()

    async def run(self, remote: RemoteItem) -> AsyncIterator[RunStarted | RemoteOutcome]:
        """Streams the item's `RunStarted` (when it has a run), then its outcome."""
        from awf_nb.engine.tool_slots import bounding
        from awf_nb.evals.executor import collect_artifacts, run_item
        from awf_nb.secrets import Masker

        async with self.slots:
            item = remote.item
            masker = self.masker
            if remote.secrets:
                masker = Masker([*self.masker.secrets, *remote.secrets])
            cassette = item.cassette
            if cassette is not None:
                local = self.dir / "cassettes" / cassette.path.name
                local.parent.mkdir(parents=True, exist_ok=True)
                local.unlink(missing_ok=True)
                if remote.replay_bytes is not None:
                    local.write_bytes(remote.replay_bytes)
                item = replace(item, cassette=CassetteUse(cassette.mode, local))
            events: asyncio.Queue[RunStarted] = asyncio.Queue()
            with bounding(self.tool_processes):  # the task takes the context as it is here
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
                artifacts = _masked(masker, collect_artifacts(self.store, outcome.row.run_id))
                # the driver's store keeps it: the worker's disk does not fill up
                await asyncio.to_thread(
                    shutil.rmtree, self.store.run_dir(outcome.row.run_id), ignore_errors=True
                )
            recorded = None
            if item.cassette is not None:
                path = item.cassette.path
                if item.cassette.mode == "record" and path.is_file():
                    recorded = path.read_bytes()
                path.unlink(missing_ok=True)
            row = masker.mask_data(outcome.row) if masker else outcome.row
            yield RemoteOutcome(RunOutcome(row, artifacts), recorded)


def _masked(masker: Masker, artifacts: RunArtifacts) -> RunArtifacts:
    if not masker:
        return artifacts
    return replace(
        artifacts,
        state_json=masker.mask(artifacts.state_json.decode()).encode(),
        transcript=masker.mask(artifacts.transcript.decode()).encode(),
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
        self.actors: list[Any] = []  # while an eval runs
        self.connected = False
        self.env: Mapping[str, str] = os.environ  # the driver's, of the eval running
        self.started = 0  # workers started for the eval running (0: not yet)

    def describe(self, concurrency: int) -> str:
        workers = self.started or self.workers
        if workers:
            return f"{concurrency} at a time on each of {workers} Ray workers"
        return f"{concurrency} at a time on each Ray worker (one per CPU of the cluster)"

    def connect(self) -> None:
        """Connect to the cluster (once): see ray_connect.py. Called before the eval's
        folder is made, on the thread that runs the eval (Ray's driver set-up does not
        complete from a thread of its own)."""
        from awf_nb.evals.ray_connect import connect

        if self.connected and self.ray.is_initialized():
            return
        connect(self.ray, self.address)
        self.connected = True

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
        self.connect()  # done already when the eval was started
        _quiet_cancelled_replies(asyncio.get_running_loop(), ray)
        self.env = os.environ if plan.env is None else plan.env
        try:
            self.started = count = self._worker_count()
            workdir = ray.put(await asyncio.to_thread(self._pack, plan))
            # the plan itself, not a reference to it: a restarted worker is given it again
            # (Ray keeps an actor's arguments while it lives)
            bare = replace(plan, items=[], env=None, on_row=None)  # only `env` below travels
            remote_class = ray.remote(
                num_cpus=1, max_restarts=MAX_ACTOR_RESTARTS, max_task_retries=0
            )(CaseWorker)
            env = travelling_env(plan)
            self.actors = [
                remote_class.remote(bare, str(plan.cwd), env, workdir) for _ in range(count)
            ]
            await self._started()
            async for event in self._dispatch(plan):
                yield event
        finally:
            await asyncio.shield(self._close())
            self.connected = False
            ray.shutdown()

    def _pack(self, plan: EvalPlan) -> bytes:
        """The working directory as it travels (see workdir.py)."""
        from awf_nb.evals import workdir

        skipped = [Path(self.store.root)] if self.store is not None else []
        source = os.environ if plan.env is None else plan.env
        return workdir.pack(plan.cwd, skipped, workdir.listed_files(dict(source)))

    async def _started(self) -> None:
        """Every worker up (its process started, awf-nb imported, the plan unpickled)."""
        pids = [actor.pid.remote() for actor in self.actors]
        try:
            await asyncio.wait_for(asyncio.gather(*pids), WORKER_START_TIMEOUT)
        except TimeoutError:
            raise UserError(
                f"the Ray workers did not start within {format_duration(WORKER_START_TIMEOUT)}",
                hint="check the cluster with `ray status`",
            ) from None
        except self.ray.exceptions.RayError as exc:
            raise UserError(
                f"the Ray workers could not start: {_last_line(exc)}",
                hint="every node needs awf-nb's dependencies: pip install 'awf-nb[ray]'",
            ) from None

    async def _close(self) -> None:
        """The workers' folders removed, then the workers ended (bounded: a worker that
        does not answer is ended all the same)."""
        actors, self.actors = self.actors, []
        with contextlib.suppress(Exception, asyncio.CancelledError):
            closing = [actor.close.remote() for actor in actors]
            await asyncio.wait_for(asyncio.gather(*closing), WORKER_CLOSE_TIMEOUT)
        for actor in actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)

    async def _dispatch(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        events: asyncio.Queue[RunStarted | RunOutcome | None] = asyncio.Queue()
        # shared by every worker's feeders: (item, how often its worker died under it)
        pending = collections.deque((item, 0) for item in plan.items)
        running = 0  # items in flight: one of them may come back to `pending`
        changed = asyncio.Condition()
        lost = _worker_errors(self.ray)

        async def take() -> tuple[WorkItem, int] | None:
            nonlocal running
            async with changed:
                await changed.wait_for(lambda: bool(pending) or running == 0)
                if not pending:
                    return None  # all done (or every worker gone: see below)
                running += 1
                return pending.popleft()

        async def done(again: tuple[WorkItem, int] | None) -> None:
            nonlocal running
            async with changed:
                running -= 1
                if again is not None:
                    pending.append(again)
                changed.notify_all()

        async def feeder(actor: Any) -> None:
            while (taken := await take()) is not None:
                item, deaths = taken
                again = None
                try:
                    await self._one(actor, item, events.put_nowait)
                except lost as exc:
                    deaths += 1
                    what = f'case "{item.case.id}" epoch {item.epoch}'
                    if deaths <= MAX_ITEM_RETRIES:
                        log.warning("a Ray worker died running %s: running it again", what)
                        again = (item, deaths)
                    else:
                        events.put_nowait(RunOutcome(_worker_row(item, deaths, exc)))
                else:
                    await done(None)
                    continue
                alive = await self._alive(actor)
                await done(again)
                if not alive:
                    return  # restarted too often: the other workers take what is left

        feeders = [
            asyncio.create_task(feeder(actor), name=f"awf-ray-feeder-{n}")
            for n, actor in enumerate(self.actors)
            for _ in range(plan.concurrency)
        ]
        finished = asyncio.gather(*feeders)
        finished.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            await finished
            while pending:  # every worker is gone for good
                item, deaths = pending.popleft()
                yield RunOutcome(_worker_row(item, deaths, None))
        finally:
            for task in feeders:
                task.cancel()
            await asyncio.wait(feeders)

    async def _alive(self, actor: Any) -> bool:
        """Whether `actor` is up again after its process died: Ray restarts it (the
        worker is "unavailable" meanwhile), or it is dead for good."""
        unavailable = getattr(self.ray.exceptions, "ActorUnavailableError", ())
        deadline = asyncio.get_running_loop().time() + WORKER_START_TIMEOUT
        gone: tuple[type[BaseException], ...] = (TimeoutError, *_worker_errors(self.ray))
        while True:
            try:
                left = deadline - asyncio.get_running_loop().time()
                await asyncio.wait_for(actor.pid.remote(), max(left, 0.0))
                return True
            except unavailable:
                if asyncio.get_running_loop().time() > deadline:
                    return False
                await asyncio.sleep(RESTART_POLL)  # Ray has no event for "restarted"
            except gone:
                return False

    async def _one(self, actor: Any, item: WorkItem, put: Any) -> None:
        replay = None
        if item.cassette is not None and item.cassette.mode == "replay":
            replay = await asyncio.to_thread(item.cassette.path.read_bytes)
        remote = RemoteItem(item, replay, item_secrets(item, self.env))
        stream = actor.run.options(num_returns="streaming").remote(remote)
        answered = False  # one outcome per item: what a worker sends after it is dropped
        try:
            async for ref in stream:
                event = await ref
                if answered:
                    continue
                if isinstance(event, RunStarted) and event.key == item.key:
                    put(event)
                    continue
                answered = True
                wrong = _wrong_answer(event, item)
                if wrong:
                    put(RunOutcome(_answer_row(item, wrong)))
                    continue
                if event.recorded is not None and item.cassette is not None:
                    await asyncio.to_thread(_write_file, item.cassette.path, event.recorded)
                put(event.outcome)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                self.ray.cancel(stream)
            raise


def _quiet_cancelled_replies(loop: asyncio.AbstractEventLoop, ray: Any) -> None:
    """Ray's answers to calls cancelled by Ctrl-C (a worker's stream, its next item) end
    as futures nobody reads any more; asyncio would print each one's traceback when it is
    collected ("Future exception was never retrieved"). Those go to awf's log; every
    other error of the loop goes where it went."""
    previous = loop.get_exception_handler()
    if getattr(previous, "awf_ray", False):
        return
    ray_errors = (ray.exceptions.RayError, asyncio.CancelledError)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), ray_errors):
            log.debug("a cancelled Ray call answered: %s", context.get("message"))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.awf_ray = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def _worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a call whose worker died or is being restarted."""
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError")
    return tuple(getattr(ray.exceptions, name) for name in names if hasattr(ray.exceptions, name))


def _wrong_answer(event: Any, item: WorkItem) -> str:
    """What is wrong with a worker's answer for `item` ("" when it is the item's
    outcome): a row of another case, or something that is not a row at all, would
    otherwise be counted or break the driver's store."""
    from awf_nb.engine.state import RunState

    if isinstance(event, RunStarted):
        return f'it started a run for case "{event.case}" epoch {event.epoch}'
    if not isinstance(event, RemoteOutcome) or not isinstance(event.outcome, RunOutcome):
        return f"it sent back a {type(event).__name__}, not a run's outcome"
    row, artifacts = event.outcome.row, event.outcome.artifacts
    if not isinstance(row, EvalRow):
        return f"it sent back a {type(row).__name__}, not a row"
    if row.run_key != item.key:
        return f'it sent back the row of case "{row.case}" epoch {row.epoch}'
    if event.recorded is not None and not isinstance(event.recorded, bytes):
        return "it sent back a cassette that is not bytes"
    if artifacts is None:
        return ""
    if not isinstance(artifacts, RunArtifacts) or artifacts.run_id != row.run_id:
        return "it sent back the files of another run"
    try:
        state = RunState.from_json(artifacts.state_json)
    except Exception as exc:
        return f"it sent back a run state that does not load: {_first_line(exc)}"
    if state.run_id != row.run_id or not isinstance(artifacts.transcript, bytes):
        return "it sent back the files of another run"
    return ""


def _answer_row(item: WorkItem, wrong: str) -> EvalRow:
    """The row of an item whose worker answered wrongly."""
    row = EvalRow(case=item.case.id, epoch=item.epoch, seed=item.seed)
    row.error = f"the Ray worker's answer is not this run's: {wrong}"
    row.error_kind = "worker"
    return row


def _worker_row(item: WorkItem, deaths: int, exc: BaseException | None) -> EvalRow:
    """The row of an item no worker could finish."""
    row = EvalRow(case=item.case.id, epoch=item.epoch, seed=item.seed)
    if exc is None:
        row.error = "no Ray worker was left alive to run it"
    else:
        row.error = (
            f"the Ray worker running it died {deaths} times (retries: {MAX_ITEM_RETRIES}): "
            f"{_first_line(exc)}"
        )
    row.error_kind = "worker"
    return row


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _last_line(exc: BaseException) -> str:
    """The last line of a Ray error (the cause, after Ray's traceback)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__
