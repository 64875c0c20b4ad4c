"""`--executor ray`: Ray actors (what awf-nb ships) against Ray tasks, on one cluster.

The issue that asked for the Ray executor said "cases go to Ray workers (tasks or actors —
measure which)". This measures it. The same eval as `benchmarks/eval.py --executor ray`
(N conversations of `--turns` agent replies with a simulated user, both on the fake model
server of benchmarks/eval.py, paced like a model) runs on one loopback-only Ray cluster
(started as benchmarks/eval.py starts one: 2 CPUs) in three designs, for each `C` of
`--concurrency`, with `--workers` W:

1. actors: the product's `RayExecutor`: W actors (one CPU each), C runs in flight on each
   actor's event loop, `RunStarted` and the outcome streamed back per run;
2. tasks: one Ray task per work item (`num_cpus` = CPUs ÷ (W×C), so up to W×C at once,
   one worker process each): each task runs its item with its own event loop
   (`asyncio.run`) and run store (a temp folder), exactly as the actor runs an item
   (`CaseWorker.run`: `run_item`, then the run's artifacts, masked); the driver submits
   every item and writes each result into its store as its task ends (`ray.wait`);
3. batches: one Ray task (one CPU) per `--batch` items (default C), each running them C at
   a time on its own event loop and store, as the local executor would; results come back
   when the batch ends.

The driver is the real one (`prepare_eval` … `EvalRun.execute`, benchmarks/eval.py's
`measure`), so it writes every row and every run's files into its own store in all three.
Printed, from one run, per design and C:

- procs: Ray worker processes started for the eval (new children of the cluster's raylet,
  sampled from /proc every 0.2 s); their peak RSS summed, and the growth of the machine's
  used memory (MemTotal - MemAvailable) over the eval;
- peak: the most runs in flight at once (started, their result not yet in the driver);
- set-up: from the executor's start to the first run started (for tasks, the task's own
  clock: the driver only learns of it when the task ends), to W×C runs in flight at once
  (all slots busy; "never" when they were not), and to the first result in the driver;
- wall time after the set-up, the floor (model time × cases ÷ (W×C)) and their ratio;
- CPU per case: the driver's (this process), the workers' (their utime + stime), the fake
  server's in total, and how busy the machine's CPUs were;
- model loads: processes that ran items, i.e. how often a bundled `local` model (cached
  per process) would be loaded, with one such load measured first (load time, RSS growth).

A per-item tasks design whose estimated memory (the largest per-process RSS seen so far,
else `--process-mib`, × W×C) would leave less than `--keep-free-gib` of the machine's
memory is skipped; a tasks design that gets there while it runs is stopped (sampled every
0.2 s). The cluster is stopped at the end (its processes, by id), on errors too. The
defaults take about 3 minutes on 2 cores; `--concurrency 5 20 50` about 5.

    python benchmarks/ray_tasks_vs_actors.py [--cases 100] [--turns 2] [--tokens 40]
        [--token-ms 20] [--workers 2] [--concurrency 5 20] [--batch N]
        [--designs actors tasks batches] [--keep-free-gib 3] [--process-mib 150]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from awf_nb.evals.executor import EvalPlan, RunOutcome, RunStarted  # noqa: E402
from awf_nb.evals.ray_executor import (  # noqa: E402
    RayExecutor,
    RemoteItem,
    RemoteOutcome,
    travelling_env,
)

SAMPLE_EVERY = 0.2  # seconds between two looks at /proc
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def load_eval_bench() -> ModuleType:
    """benchmarks/eval.py as a module: its fake server, helpers and `measure`."""
    spec = importlib.util.spec_from_file_location("bench_eval", HERE / "eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_eval_bench()


# --- what a Ray task runs (shipped by value: it names nothing of this module) -------------


def run_items(
    plan: EvalPlan, driver_cwd: str, env: dict[str, str], workdir: bytes, remotes: list[RemoteItem]
) -> tuple[int, list[tuple[float | None, list[Any]]]]:
    """A task's body: `remotes` run as the product's actor runs an item (`CaseWorker.run`),
    `plan.concurrency` at a time, on an event loop and a run store (temp folder) of the
    task's own, removed at the end. Returns the process id and, per item, when its run
    started (this machine's clock) and its events (`RunStarted`, `RemoteOutcome`)."""
    import asyncio
    import os
    import time

    from awf_nb.evals.executor import RunStarted
    from awf_nb.evals.ray_executor import CaseWorker

    async def main() -> list[tuple[float | None, list[Any]]]:
        worker = CaseWorker(plan, driver_cwd, env, workdir)

        async def one(remote: RemoteItem) -> tuple[float | None, list[Any]]:
            started, events = None, []
            async for event in worker.run(remote):
                if isinstance(event, RunStarted):
                    started = time.time()
                events.append(event)
            return started, events

        try:
            return list(await asyncio.gather(*(one(remote) for remote in remotes)))
        finally:
            worker.close()

    return os.getpid(), asyncio.run(main())


# --- the executors measured ---------------------------------------------------------------


class TaskExecutor(RayExecutor):
    """Work items as Ray tasks: one per item (`batch` None) or per `batch` items. Connects
    as `RayExecutor` does (the same runtime environment), then submits every task at once
    and reports each task's runs when it ends."""

    def __init__(
        self, store: Any, *, address: str, workers: int, batch: int | None, stop: threading.Event
    ) -> None:
        super().__init__(store, address=address, workers=workers)
        self.batch = batch
        self.stop = stop  # set by the memory watch: give up
        self.run_started: dict[str, float] = {}
        self.pids: set[int] = set()

    def describe(self, concurrency: int) -> str:
        return "Ray tasks"

    async def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        ray = self.ray
        self.connect()
        pending: list[Any] = []
        try:
            workers = self._worker_count()
            cpus = float(ray.cluster_resources()["CPU"])
            size = self.batch or 1
            share = cpus / workers if self.batch else cpus / (workers * plan.concurrency)
            task = ray.remote(num_cpus=share, max_retries=0)(run_items)
            bare = ray.put(replace(plan, items=[], env=None))
            env, cwd = travelling_env(plan), str(plan.cwd)
            workdir = ray.put(self._pack(plan))
            items = plan.items
            by_key = {item.key: item for item in items}
            for start in range(0, len(items), size):
                remotes = [await remote_item(item) for item in items[start : start + size]]
                pending.append(task.remote(bare, cwd, env, workdir, remotes))
            while pending:
                ready, pending = await asyncio.to_thread(
                    ray.wait, pending, num_returns=1, timeout=SAMPLE_EVERY
                )
                if self.stop.is_set():
                    raise MemoryError("the machine's free memory ran low: stopped")
                if ready and pending:
                    more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                    ready += more
                for ref in ready:
                    pid, results = await ref
                    self.pids.add(pid)
                    for started, events in results:
                        for event in events:
                            if isinstance(event, RunStarted):
                                self.run_started[event.run_id] = started or time.time()
                                yield event
                            else:
                                row = event.outcome.row
                                yield await outcome(event, by_key[(row.case, row.epoch)])
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            ray.shutdown()


async def remote_item(item: Any) -> RemoteItem:
    """A work item as it travels (its cassette to replay as bytes), as `RayExecutor` does."""
    replay = None
    if item.cassette is not None and item.cassette.mode == "replay":
        replay = await asyncio.to_thread(item.cassette.path.read_bytes)
    return RemoteItem(item, replay)


async def outcome(event: RemoteOutcome, item: Any) -> RunOutcome:
    """A task's outcome for the driver (a cassette it recorded written first, where a
    local eval writes it), as `RayExecutor` does."""
    if event.recorded is not None and item.cassette is not None:
        path: Path = item.cassette.path
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_bytes, event.recorded)
    return event.outcome


class Timed:
    """An executor, timed: when it started, when each run started, when each result came."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name  # the eval's manifest names the executor
        self.called = 0.0
        self.starts: list[float] = []
        self.results: list[float] = []

    def describe(self, concurrency: int) -> str:
        return str(self.inner.describe(concurrency))

    async def run(self, plan: EvalPlan) -> AsyncIterator[RunStarted | RunOutcome]:
        self.called = time.time()
        own = getattr(self.inner, "run_started", {})
        async for event in self.inner.run(plan):
            now = time.time()
            if isinstance(event, RunStarted):
                self.starts.append(own.get(event.run_id, now))
            else:
                self.results.append(now)
            yield event


@contextlib.contextmanager
def executor_used(timed: Timed) -> Iterator[None]:
    """`prepare_eval` (inside `measure`) given `timed` as its executor."""
    import awf_nb.evals.driver as driver

    original = driver.make_executor
    driver.make_executor = lambda *args, **kwargs: timed
    try:
        yield
    finally:
        driver.make_executor = original


# --- the cluster's worker processes, from /proc --------------------------------------------


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def worker_pids(raylet: int) -> dict[int, list[str]]:
    """Ray's worker processes (children of `raylet` but its agents), with their stat."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = proc_stat(int(name))
        if fields is None or int(fields[1]) != raylet:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                command = cmdline.read().decode(errors="replace")
        except OSError:
            continue
        if "agent" not in command.lower():
            found[int(name)] = fields
    return found


def meminfo_mib() -> dict[str, float]:
    """/proc/meminfo's figures, MiB."""
    with open("/proc/meminfo") as meminfo:
        return {key: int(value.split()[0]) / 1024 for key, value in
                (line.split(":", 1) for line in meminfo)}  # fmt: skip


def used_mib() -> float:
    """The machine's used memory (MemTotal - MemAvailable), MiB."""
    info = meminfo_mib()
    return info["MemTotal"] - info["MemAvailable"]


def available_mib() -> float:
    return meminfo_mib()["MemAvailable"]


@dataclass
class Watch:
    """Samples the cluster's worker processes while an eval runs (a thread of its own)."""

    raylet: int
    keep_free_mib: float
    stop_eval: threading.Event = field(default_factory=threading.Event)
    before: dict[int, list[str]] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)  # per new process: last seen
    peak_rss_mib: float = 0.0
    used_before: float = 0.0
    peak_used: float = 0.0
    low_memory: bool = False
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.before = worker_pids(self.raylet)
        self.used_before = self.peak_used = used_mib()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def finish(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(SAMPLE_EVERY):
            rss = 0.0
            for pid, fields in worker_pids(self.raylet).items():
                if pid in self.before:
                    continue
                rss += int(fields[21]) * PAGE / 2**20
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
            self.peak_rss_mib = max(self.peak_rss_mib, rss)
            self.peak_used = max(self.peak_used, used_mib())
            if available_mib() < self.keep_free_mib:
                self.low_memory = True
                self.stop_eval.set()

    @property
    def processes(self) -> int:
        return len(self.cpu)


def settle_workers(raylet: int, baseline: int, timeout: float = 30.0) -> None:
    """Wait until the last eval's worker processes are gone (Ray ends a job's workers when
    its driver disconnects), so that they do not count for the next."""
    deadline = time.monotonic() + timeout
    while len(worker_pids(raylet)) > baseline and time.monotonic() < deadline:
        time.sleep(0.5)


# --- one design, measured ------------------------------------------------------------------


def measure_design(
    args: argparse.Namespace,
    base: str,
    server_pid: int,
    raylet: int,
    address: str,
    design: str,
    concurrency: int,
) -> dict[str, Any]:
    run_args = argparse.Namespace(**{**vars(args), "concurrency": concurrency})
    watch = Watch(raylet, args.keep_free_gib * 1024)
    inner: Any
    if design == "actors":
        inner = RayExecutor(None, address=address, workers=args.workers)
    else:
        batch = (args.batch or concurrency) if design == "batches" else None
        inner = TaskExecutor(
            None, address=address, workers=args.workers, batch=batch, stop=watch.stop_eval
        )
    timed = Timed(inner)
    server_cpu = bench.process_cpu(server_pid)
    busy = bench.machine_busy()
    watch.start()
    try:
        with executor_used(timed), tempfile.TemporaryDirectory(prefix="awf-tva-") as tmp:
            measured = bench.measure(
                run_args, base, Path(tmp), executor="ray", ray_address=address, workers=args.workers
            )
            figures: dict[str, Any] = asyncio.run(measured)
    except (MemoryError, SystemExit) as exc:
        figures = {"failed": str(exc)}
    finally:
        watch.finish()
    slots = args.workers * concurrency
    starts = sorted(timed.starts)
    peak, all_busy = in_flight(timed, slots)
    figures.update(
        design=design,
        concurrency=concurrency,
        server_cpu=bench.process_cpu(server_pid) - server_cpu,
        busy=bench.machine_busy(busy),
        processes=watch.processes,
        worker_cpu=sum(watch.cpu.values()),
        peak_rss_mib=watch.peak_rss_mib,
        used_growth_mib=watch.peak_used - watch.used_before,
        first_start=starts[0] - timed.called if starts else float("nan"),
        all_busy=all_busy,
        peak_in_flight=peak,
        first_result=min(timed.results) - timed.called if timed.results else float("nan"),
        loads=len(inner.pids) if isinstance(inner, TaskExecutor) else args.workers,
    )
    if watch.low_memory:
        figures["failed"] = f"stopped: under {args.keep_free_gib:g} GiB of memory left"
    return figures


def in_flight(timed: Timed, slots: int) -> tuple[int, float]:
    """The most runs in flight at once (started, result not yet in the driver), and when
    `slots` of them first were (from the executor's start; nan: never)."""
    moves = sorted([(t, 1) for t in timed.starts] + [(t, -1) for t in timed.results])
    count, peak, reached = 0, 0, float("nan")
    for when, move in moves:
        count += move
        peak = max(peak, count)
        if count >= slots and math.isnan(reached):
            reached = when - timed.called
    return peak, reached


def model_load_probe() -> str:
    """One load of the bundled `local` model in a fresh process: seconds and RSS growth."""
    code = (
        "import json, os, time\n"
        "from awf_nb.providers.local import default_model_path\n"
        "from awf_nb.providers.local_model import get_model\n"
        "def rss():\n"
        "    pages = int(open('/proc/self/statm').read().split()[1])\n"
        "    return pages * os.sysconf('SC_PAGE_SIZE') / 2**20\n"
        "before = rss(); t = time.perf_counter()\n"
        "get_model(default_model_path(), 2048, 1)\n"
        "print(json.dumps([time.perf_counter() - t, rss() - before]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parent,
        timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return f"not measured ({(done.stderr.strip().splitlines() or ['?'])[-1]})"
    seconds, mib = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{seconds:.2f}s and {mib:.0f} MiB of RSS per load"


def fits(args: argparse.Namespace, runs: list[dict[str, Any]], concurrency: int) -> str:
    """Why a per-item tasks design would not fit in memory ('' when it would)."""
    seen = [r["peak_rss_mib"] / r["processes"] for r in runs if r.get("processes")]
    per_process = max(seen, default=args.process_mib)
    need = per_process * args.workers * concurrency
    free = available_mib() - args.keep_free_gib * 1024
    if need > free:
        return f"skipped: ~{need / 1024:.1f} GiB needed, {free / 1024:.1f} GiB to spare"
    return ""


def seconds(value: float) -> str:
    return "never" if math.isnan(value) else f"{value:.1f}s"


def report(args: argparse.Namespace, runs: list[dict[str, Any]], probe: str) -> None:
    replies = args.turns + (args.turns - 1)
    model_time = replies * args.tokens * args.token_ms / 1000
    print(f"{args.cases} conversations of {args.turns} agent replies with a simulated user; "
          f"{args.tokens} tokens per reply at {args.token_ms:g} ms per token "
          f"({model_time:.2f}s of model time per conversation); {args.workers} workers × C "
          f"in flight; a 2-CPU loopback Ray cluster")  # fmt: skip
    print("procs: Ray worker processes started; peak: most runs in flight at once; times from")
    print("the executor's start: first run started / W×C in flight at once (never: not once) /")
    print("first result; after: wall after the first start; CPU ms per case (driver, Ray workers)")
    print(f"{'design':9}{'C':>4}{'procs':>6}{'peak':>5}{'start':>7}{'all':>7}{'result':>8}"
          f"{'after':>8}{'floor':>7}{'ratio':>6}{'drv':>6}{'wrk':>6}{'RSS':>8}{'mem+':>8}{'srv':>6}"
          f"{'busy':>5}{'loads':>6}")  # fmt: skip
    for r in runs:
        head = f"{r['design']:9}{r['concurrency']:4}"
        if "wall" not in r:
            print(f"{head}  {r['failed']}")
            continue
        after = r["wall"] - r["first_start"]
        print(f"{head}{r['processes']:6}{r['peak_in_flight']:5}{r['first_start']:6.1f}s"
              f"{seconds(r['all_busy']):>7}"
              f"{r['first_result']:7.1f}s{after:7.1f}s{r['ideal']:6.1f}s{after / r['ideal']:6.2f}"
              f"{r['cpu_per_conversation_ms']:6.0f}{r['worker_cpu'] / args.cases * 1000:6.0f}"
              f"{r['peak_rss_mib']:7.0f}M{r['used_growth_mib']:7.0f}M{r['server_cpu']:5.1f}s"
              f"{r['busy'] * 100:4.0f}%{r['loads']:6}")  # fmt: skip
        if "failed" in r:
            print(f"{'':13}{r['failed']}")
    print(f"bundled `local` model (SmolLM2-135M, cached per process): {probe}; it loads "
          f"once per process that runs items (loads): W for actors and batches, up to W×C "
          f"for per-item tasks, each copy in memory for the whole eval")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--turns", type=int, default=2, help="agent replies per conversation")
    parser.add_argument("--tokens", type=int, default=40, help="tokens per reply")
    parser.add_argument("--token-ms", type=float, default=20.0, help="milliseconds per token")
    parser.add_argument("--workers", type=int, default=2, help="W: actors (CPUs of the work)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[5, 20], help="C values")
    parser.add_argument("--batch", type=int, help="items per batch task (default: C)")
    parser.add_argument("--designs", nargs="+", default=["actors", "tasks", "batches"])
    parser.add_argument("--keep-free-gib", type=float, default=3.0)
    parser.add_argument(
        "--process-mib", type=float, default=150.0, help="RSS per worker process, until seen"
    )
    args = parser.parse_args()
    from tests.support.ray_cluster import RayCluster

    port = bench.free_port()
    server = subprocess.Popen(
        [sys.executable, bench.__file__, "--serve", str(port), "--tokens", str(args.tokens),
         "--token-ms", str(args.token_ms)],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    cluster = RayCluster(cpus=2)  # as benchmarks/eval.py starts one: loopback only
    runs: list[dict[str, Any]] = []
    try:
        base = f"http://127.0.0.1:{port}/v1"
        bench.wait_ready(f"{base}/models", server)
        probe = model_load_probe()
        cluster.start()
        os.environ.update(cluster.env)
        raylet = next(p.pid for p in cluster.processes() if p.name() == "raylet")
        baseline = len(worker_pids(raylet))  # the idle workers Ray starts with
        for concurrency in args.concurrency:
            for design in args.designs:
                skip = fits(args, runs, concurrency) if design == "tasks" else ""
                if skip:
                    runs.append({"design": design, "concurrency": concurrency, "failed": skip})
                    continue
                print(f"running {design}, C={concurrency} ...", file=sys.stderr, flush=True)
                runs.append(
                    measure_design(
                        args, base, server.pid, raylet, cluster.address, design, concurrency
                    )
                )
                settle_workers(raylet, baseline)
    finally:
        cluster.stop()
        server.terminate()
        server.wait(timeout=10)
    left = cluster.processes()
    report(args, runs, probe)
    print(f"cluster stopped: {len(left)} of its processes left")


if __name__ == "__main__":
    main()
