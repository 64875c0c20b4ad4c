"""An eval's own cost at scale: many simulated conversations in one process.

Runs an eval of N cases, each a conversation of `--turns` agent replies with a simulated
user, both on a local fake model server in its own process (Starlette on uvicorn) that is
paced like a model: `--token-ms` per token, `--tokens` per reply. The ideal is what the
same conversations cost when made directly, with nothing of awf's: a bare
`httpx2.AsyncClient` script (the HTTP stack awf streams with) sending the same number of
streamed requests, each conversation's in sequence, `--concurrency` conversations at once,
to the same server, and decoding each reply (every event's JSON, the text joined). It is
timed just before and just after the eval (their mean is the baseline), so a shared
machine's load weighs on both sides alike. Prints, from one run:

1. overhead: the eval's wall time ÷ the direct client's at the same concurrency (the
   target, <= 1.25): what the engine, the store, the simulated user and the scorers add;
2. both wall times ÷ the theoretical floor (model time × cases ÷ concurrency, where model
   time is replies × tokens × token time): the direct client does not reach it either, as
   its HTTP client pays per request for its connection pool and per chunk for its parser,
   and both processes share the machine's cores with the server;
3. CPU time per conversation of awf (this process during the eval: the engine, the
   store, the scorers) and of the direct client, and their difference (awf's own share);
4. peak memory (max RSS) and its growth over the eval, per conversation in flight;
5. peak threads of this process;
6. the fake server's CPU time, to see when it is the bottleneck, and the load average.

    python benchmarks/eval.py [--cases 200] [--concurrency 50] [--turns 3]
                              [--tokens 40] [--token-ms 20]

With `--sweep [LIST]`, the same eval runs at each concurrency of LIST (default 10, 50,
100, 200, 500; `--sweep-cases N` cases each, default the concurrency and at least 20),
each in a process of its own after one unmeasured warm-up case, and one table shows, per
concurrency: CPU per conversation, wall ÷ floor, memory growth per conversation in
flight, the bytes that reached the disk per case and the store's size per case. With
`--inspect-python PYTHON` (an interpreter of a separate venv with `inspect-ai` and
`openai`: Inspect AI is never one of awf's dependencies) the same workload also runs
through Inspect AI (benchmarks/inspect_eval.py: streamed from the same server, a solver
with the same simulated user, one scorer), and the table shows awf ÷ Inspect for CPU,
wall and memory. The issue-sized run is `--sweep --sweep-cases 1000`; the quick one
(the default) takes a few minutes on two cores.

    python benchmarks/eval.py --sweep [--inspect-python /tmp/inspect-venv/bin/python]

With `--variants`, the eval has two variants (a baseline and a candidate) run on the same
cases, `--epochs` (default 3) and seed, and it prints the time of what is shown of it (the
paired comparison, the gates, the summary per variant, the Markdown report) against the
eval's wall time (target: <= 1.05 in all). The issue-sized run is `--variants --cases 1000`.

A real store on disk is used, as `awf eval` uses it (each run's files forced onto the disk
when the run ends, the results line fsynced).

With `--executor ray` (needs `pip install 'awf-nb[ray]'`), the same eval runs three times
instead: on the local executor, then on a Ray cluster with 1 and with 2 workers (each with
`--concurrency` runs in flight), and it prints, from that one run:

- the Ray path's set-up (connecting, starting the workers: until the first run starts);
- wall time per case after the set-up and the ratio to the floor (model time × cases ÷
  runs in flight: `--concurrency` × workers), and the Ray path's overhead per case
  against the local executor;
- throughput (cases per second after the set-up) with 2 workers ÷ with 1;
- the driver's CPU per case (writing the rows and the runs the workers send back), the
  fake server's CPU, and how busy the machine's CPUs were: when they are all busy, the
  CPU — not Ray, not the model — is the bottleneck, and more workers cannot help.

The cluster is `--ray-address ADDR`, or one the benchmark starts for itself on this
machine (`ray start --head`, loopback only, 2 CPUs) and stops at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORKFLOW = """\
name: bench-chat
inputs: [{name: topic, required: true}]
states:
  initial: chat
  chat:
    type: agent
    provider: openai_compatible
    mode: conversation
    prompt: "Help me with {{.inputs.topic}}"
    options: {base_url: "BASE", model: fake}
    on_success: done
  done: {type: terminal}
"""

EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
user:
  provider: openai_compatible
  options: {base_url: "BASE", model: fake}
  persona: "You want help with {{.case.topic}}."
  max_turns: TURNS
scorers:
  - name: full
    condition: 'stopped_by == "max_turns" and turns == TURNS'
concurrency: CONCURRENCY
"""


async def two_variants(args: argparse.Namespace, base: str, folder: Path) -> None:
    """`--variants`: one eval with two variants (a baseline and a candidate) on the same
    cases, epochs and seed, then what a person is shown of it: the paired comparison, the
    gates, the summary per variant and the Markdown report. Their time ÷ the eval's wall
    time (the target: the whole <= 1.05 of the eval alone)."""
    import io

    from awf_nb.evals.api import prepare_eval
    from awf_nb.evals.gates import check_result_gates, parse_gates
    from awf_nb.evals.report import load_report, render
    from awf_nb.frontends.terminal.eval_progress import console, print_summary
    from awf_nb.store import Store

    (folder / "wf.yaml").write_text(WORKFLOW.replace("BASE", base))
    rows = "".join(
        json.dumps({"id": f"c{i}", "topic": f"topic {i}"}) + "\n" for i in range(args.cases)
    )
    (folder / "cases.jsonl").write_text(rows)
    text = (EVAL.replace("BASE", base).replace("TURNS", str(args.turns))
            .replace("CONCURRENCY", str(args.concurrency)))  # fmt: skip
    text += "variants:\n  baseline: {}\n  candidate: {inputs: {topic: 'more {{.case.topic}}'}}\n"
    (folder / "b.eval.yaml").write_text(text)
    store = Store(folder / "storage")
    run = prepare_eval(folder / "b.eval.yaml", storage=store, cwd=folder, epochs=args.epochs,
                       seed=11)  # fmt: skip
    started = time.perf_counter()
    result = await run.execute(None)
    wall = time.perf_counter() - started
    started = time.perf_counter()
    comparisons = result.comparisons()
    gates = parse_gates(["passed >= 80%", "no_regression: baseline"])
    check_result_gates(gates, result, {"baseline": comparisons})
    print_summary(result, console(io.StringIO()))
    report = render(load_report(result.eval_id, storage=store), "markdown")
    spent = time.perf_counter() - started
    print(f"{args.cases} cases x 2 variants x {args.epochs} epochs: eval {wall:.2f}s, "
          f"comparison + gates + summary + report {spent:.3f}s ({len(report)} chars); ratio "
          f"{(wall + spent) / wall:.4f} (target <= 1.05)")  # fmt: skip
    print(comparisons[0].lines()[0])


# --- the fake model server (its own process) ------------------------------------------------


def serve(port: int, tokens: int, token_ms: float) -> None:
    """An OpenAI-compatible streaming endpoint: `tokens` chunks, `token_ms` apart."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def chunk(delta: dict[str, str], finish: str | None = None) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    async def completions(request: Request) -> StreamingResponse:
        await request.body()

        async def stream():  # type: ignore[no-untyped-def]
            # Paced against the clock, not by sleeping token_ms after each token: a busy
            # machine's late wake-ups must not make the "model" slower than it is.
            loop = asyncio.get_running_loop()
            start = loop.time()
            yield chunk({"role": "assistant", "content": ""})
            for index in range(tokens):
                await asyncio.sleep(max(0.0, start + (index + 1) * token_ms / 1000 - loop.time()))
                yield chunk({"content": f" w{index}"})
            yield chunk({}, "stop")
            usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"data": [{"id": "fake"}]})

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                            Route("/v1/models", models)])  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    import httpx2 as httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the fake server exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the fake server did not start")


# --- the measurement -------------------------------------------------------------------------


def disk_writes() -> int:
    """Bytes this process has caused to be written to storage so far: the kernel's
    `write_bytes` (counted when a page of the cache is first dirtied, a 4 KiB page at a
    time) less its `cancelled_write_bytes` (dirty pages of a file removed or truncated
    before they were written back: a file replaced by a rename, as state files are, never
    reaches the disk)."""
    counters = {}
    with open("/proc/self/io") as io:
        for line in io:
            name, _, value = line.partition(":")
            counters[name] = int(value)
    return counters.get("write_bytes", 0) - counters.get("cancelled_write_bytes", 0)


def folder_bytes(folder: Path) -> int:
    """The size of the files a store keeps, each file once (the runs of one workflow share
    their `workflow.yaml`, hard links to one copy; SQLite's -wal and -shm files are its
    journal, folded into the database and emptied as it goes)."""
    sizes: dict[tuple[int, int], int] = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.endswith(("-wal", "-shm")):
            info = path.stat()
            sizes[(info.st_dev, info.st_ino)] = info.st_size
    return sum(sizes.values())


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def measure(
    args: argparse.Namespace, base: str, folder: Path, **executor: object
) -> dict[str, float]:
    from awf_nb.evals.api import prepare_eval
    from awf_nb.store import Store

    (folder / "wf.yaml").write_text(WORKFLOW.replace("BASE", base))
    rows = "".join(
        json.dumps({"id": f"c{i}", "topic": f"topic {i}"}) + "\n" for i in range(args.cases)
    )
    (folder / "cases.jsonl").write_text(rows)
    text = (EVAL.replace("BASE", base).replace("TURNS", str(args.turns))
            .replace("CONCURRENCY", str(args.concurrency)))  # fmt: skip
    (folder / "b.eval.yaml").write_text(text)
    run = prepare_eval(
        folder / "b.eval.yaml", storage=Store(folder / "storage"), cwd=folder, **executor
    )  # type: ignore[arg-type]
    first_start: list[float] = []

    class FirstStart:
        """Notes when the first run starts: the executor's set-up is over."""

        def eval_started(self, run: object) -> None: ...
        def run_started(self, case: str, epoch: int, run_id: str, variant: str = "") -> None:
            if not first_start:
                first_start.append(time.perf_counter())

        def run_finished(self, row: object) -> None: ...
        def eval_finished(self, result: object) -> None: ...

    peak_threads = threading.active_count()
    stop = asyncio.Event()

    async def watch_threads() -> None:
        nonlocal peak_threads
        while not stop.is_set():
            peak_threads = max(peak_threads, threading.active_count())
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch_threads())
    written_before = disk_writes()
    rss_before = rss_mib()
    cpu_before = time.process_time()
    wall_before = time.perf_counter()
    result = await run.execute(FirstStart())
    wall = time.perf_counter() - wall_before
    setup = first_start[0] - wall_before if first_start else 0.0
    cpu = time.process_time() - cpu_before
    written = disk_writes() - written_before
    stop.set()
    await watcher
    summary = result.summary
    if summary.passed != args.cases:
        raise SystemExit(f"only {summary.passed} of {args.cases} conversations went as planned: "
                         f"{[r.error for r in result.rows if not r.passed][:3]}")  # fmt: skip
    replies = args.turns + (args.turns - 1)  # the agent's and the simulated user's
    model_time = replies * args.tokens * args.token_ms / 1000
    in_flight = args.concurrency * int(executor.get("workers") or 1)  # type: ignore[call-overload]
    ideal = model_time * args.cases / in_flight
    return {
        "wall": wall,
        "setup": setup,
        "after_setup": wall - setup,
        "ideal": ideal,
        "ratio": wall / ideal,
        "cpu_per_conversation_ms": cpu / args.cases * 1000,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_growth_per_conversation_kib": max(rss_mib() - rss_before, 0) * 1024 / args.concurrency,
        "peak_threads": peak_threads,
        "model_time": model_time,
        "rss_before_mib": rss_before,
        "written_per_case": written / args.cases,
        "kept_per_case": folder_bytes(folder / "storage") / args.cases,
    }


async def bare_client(args: argparse.Namespace, base: str) -> tuple[float, float]:
    """The same requests (replies per conversation in sequence, `--concurrency`
    conversations at once) with a bare httpx client, each streamed reply decoded (every
    event's JSON, the text joined): its wall time and its CPU time (seconds)."""
    import httpx2 as httpx

    replies = args.turns + (args.turns - 1)
    gate = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(
        max_connections=args.concurrency * 2, max_keepalive_connections=args.concurrency * 2
    )
    body = {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:

        async def conversation() -> None:
            async with gate:
                for _ in range(replies):
                    pieces: list[str] = []
                    async with client.stream(
                        "POST", f"{base}/chat/completions", json=body
                    ) as response:
                        async for line in response.aiter_lines():
                            add_text(pieces, line)
                    "".join(pieces)  # the reply, as a client would keep it

        cpu_before = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(conversation() for _ in range(args.cases)))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
    return wall, cpu


def add_text(pieces: list[str], line: str) -> None:
    """The text of one SSE line of a streamed completion, added to `pieces`: the decoding
    no client can skip (it has to read the reply to use it)."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return
    for choice in json.loads(line[6:])["choices"]:
        pieces.append(choice["delta"].get("content") or "")


def machine_busy(since: tuple[float, float] | None = None) -> Any:
    """The machine's (busy, total) CPU seconds so far, or with `since` the fraction of
    its CPU time that was busy from then on (all CPUs: 100% is every core busy)."""
    with open("/proc/stat") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    idle, total = fields[3] + fields[4], sum(fields)
    if since is None:
        return (total - idle, total)
    return ((total - idle) - since[0]) / max(total - since[1], 1e-9)


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ray_comparison(args: argparse.Namespace, base: str, server_pid: int) -> None:
    """`--executor ray`: the local executor, then Ray with 1 and 2 workers (see above)."""
    cluster = None
    address = args.ray_address
    if address is None:
        from tests.support.ray_cluster import RayCluster

        cluster = RayCluster(cpus=2)
    try:
        if cluster is not None:
            cluster.start()
            address = cluster.address
            os.environ.update(cluster.env)
        runs: dict[str, dict[str, float]] = {}
        for label, executor in [
            ("local", {}),
            ("ray × 1", {"executor": "ray", "ray_address": address, "workers": 1}),
            ("ray × 2", {"executor": "ray", "ray_address": address, "workers": 2}),
        ]:
            server_cpu = process_cpu(server_pid)
            busy = machine_busy()
            with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
                runs[label] = asyncio.run(measure(args, base, Path(tmp), **executor))
            runs[label]["server_cpu"] = process_cpu(server_pid) - server_cpu
            runs[label]["busy"] = machine_busy(busy)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"{args.cases} conversations of {args.turns} agent replies with a simulated user, "
          f"{args.concurrency} in flight per worker; {args.tokens} tokens per reply at "
          f"{args.token_ms:g} ms per token ({runs['local']['model_time']:.2f}s of model time "
          f"per conversation)")  # fmt: skip
    print(f"{'':10}{'set-up':>9}{'after':>9}{'floor':>9}{'ratio':>8}{'per case':>11}"
          f"{'driver CPU':>13}{'server CPU':>12}{'CPUs busy':>11}")  # fmt: skip
    for label, f in runs.items():
        print(f"{label:10}{f['setup']:8.2f}s{f['after_setup']:8.2f}s{f['ideal']:8.2f}s"
              f"{f['after_setup'] / f['ideal']:8.3f}"
              f"{f['after_setup'] / args.cases * 1000:9.1f}ms"
              f"{f['cpu_per_conversation_ms']:10.1f}ms/case"
              f"{f['server_cpu']:8.1f}s"
              f"{f['busy'] * 100:9.0f}%")  # fmt: skip
    local, one, two = runs["local"], runs["ray × 1"], runs["ray × 2"]
    overhead = (one["after_setup"] - local["after_setup"]) / args.cases * 1000
    print(f"Ray path overhead per case (1 worker vs local, after set-up): {overhead:+.1f} ms "
          f"of wall time; set-up {one['setup']:.1f}s once per eval")  # fmt: skip
    print(f"throughput 2 workers ÷ 1 worker (after set-up): "
          f"{one['after_setup'] / two['after_setup']:.2f} (ideal 2.00)")  # fmt: skip


def level(args: argparse.Namespace, base: str) -> None:
    """`--level`: one measured eval against the server at `base` (its own process, so
    that its peak memory is its own); prints its figures as one JSON line."""
    # One case first, not measured: the imports and set-up of a first run (Inspect's
    # side warms up the same way), so the figures are per conversation.
    with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
        asyncio.run(measure(argparse.Namespace(**{**vars(args), "cases": 1}), base, Path(tmp)))
    with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
        figures = asyncio.run(measure(args, base, Path(tmp)))
    print(json.dumps(figures))


def sweep(args: argparse.Namespace, base: str, server_pid: int) -> None:
    """`--sweep`: the same eval at each concurrency, awf's then Inspect AI's, each in a
    process of its own; prints one table."""
    common = ["--turns", str(args.turns), "--tokens", str(args.tokens),
              "--token-ms", str(args.token_ms)]  # fmt: skip
    rows = []
    for concurrency in [int(c) for c in args.sweep.split(",")]:
        cases = args.sweep_cases or max(concurrency, 20)
        sizes = ["--cases", str(cases), "--concurrency", str(concurrency)]
        server_cpu = process_cpu(server_pid)
        awf = json.loads(run_json([sys.executable, __file__, "--level", base, *sizes, *common]))
        awf["server_cpu"] = process_cpu(server_pid) - server_cpu
        inspect = None
        if args.inspect_python:
            script = str(Path(__file__).with_name("inspect_eval.py"))
            inspect = json.loads(run_json([args.inspect_python, script, "--base-url", base,
                                           *sizes, "--turns", str(args.turns)]))  # fmt: skip
            if inspect["passed"] != cases:
                raise SystemExit(f"Inspect: {inspect['passed']} of {cases} samples passed")
        rows.append((concurrency, cases, awf, inspect))
    model_time = rows[0][2]["model_time"]
    print(f"{args.turns} agent replies with a simulated user per conversation; {args.tokens} "
          f"tokens per reply at {args.token_ms:g} ms per token ({model_time:.2f}s of model "
          f"time per conversation); floor = model time × cases ÷ concurrency")  # fmt: skip
    print(f"{'':>14}{'---------------- awf ----------------':>46}"
          f"{'------------- Inspect AI -------------':>42}{'awf ÷ Inspect':>18}")  # fmt: skip
    print(f"{'in flight':>9}{'cases':>6}{'CPU/conv':>10}{'wall/floor':>11}{'KiB/conv':>9}"
          f"{'written':>9}{'kept':>8}{'CPU/conv':>11}{'wall/floor':>11}{'KiB/conv':>9}"
          f"{'written':>9}{'CPU':>9}{'wall':>7}{'mem':>6}")  # fmt: skip
    for concurrency, cases, awf, inspect in rows:
        awf_cpu = awf["cpu_per_conversation_ms"]
        awf_mem = (awf["peak_rss_mib"] - awf["rss_before_mib"]) * 1024 / concurrency
        written, kept = awf["written_per_case"] / 1024, awf["kept_per_case"] / 1024
        line = (f"{concurrency:9}{cases:6}{awf_cpu:8.1f}ms{awf['ratio']:11.2f}{awf_mem:9.0f}"
                f"{written:7.1f}KB{kept:6.1f}KB")  # fmt: skip
        if inspect is not None:
            in_cpu = inspect["cpu"] / cases * 1000
            in_ratio = inspect["wall"] / awf["ideal"]
            in_mem = (inspect["peak_rss_mib"] - inspect["rss_before_mib"]) * 1024 / concurrency
            line += (f"{in_cpu:9.1f}ms{in_ratio:11.2f}{in_mem:9.0f}"
                     f"{inspect['written'] / cases / 1024:7.1f}KB{awf_cpu / in_cpu:9.2f}"
                     f"{awf['ratio'] / in_ratio:7.2f}"
                     f"{awf_mem / max(in_mem, 1e-9):6.2f}")  # fmt: skip
        print(line)
    first, last = rows[0][2], rows[-1][2]
    print(f"awf's CPU per conversation at {rows[-1][0]} in flight ÷ at {rows[0][0]}: "
          f"{last['cpu_per_conversation_ms'] / first['cpu_per_conversation_ms']:.2f} "
          f"(target <= 1.2); KiB/conv: memory growth per conversation in flight; written: "
          f"bytes that reached the disk per case; kept: the store's size per case")  # fmt: skip


def run_json(command: list[str]) -> str:
    """The last line of what `command` prints (it fails the benchmark if it fails)."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True, timeout=3600, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{command[1]} failed with exit code {done.returncode}")
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3, help="agent replies per conversation")
    parser.add_argument("--tokens", type=int, default=40, help="tokens per reply")
    parser.add_argument("--token-ms", type=float, default=20.0, help="milliseconds per token")
    parser.add_argument("--executor", choices=["local", "ray"], default="local")
    parser.add_argument("--ray-address", metavar="ADDR", help="--executor ray: the cluster")
    parser.add_argument(
        "--sweep", metavar="LIST", nargs="?", const="10,50,100,200,500",
        help="run at each concurrency of LIST (default 10,50,100,200,500) and print a table",
    )  # fmt: skip
    parser.add_argument(
        "--sweep-cases", type=int, metavar="N",
        help="--sweep: N cases at every concurrency (default: the concurrency, at least 20)",
    )  # fmt: skip
    parser.add_argument(
        "--inspect-python", metavar="PYTHON",
        help="--sweep: also run the workload through Inspect AI with this interpreter "
        "(a venv with inspect-ai and openai; see benchmarks/inspect_eval.py)",
    )  # fmt: skip
    parser.add_argument(
        "--variants",
        action="store_true",
        help="two variants on the same cases, epochs and seed: the comparison's share of the time",
    )
    parser.add_argument("--epochs", type=int, default=3, help="--variants: epochs per case")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--level", metavar="BASE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tokens, args.token_ms)
        return
    if args.level:
        level(args, args.level)
        return
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--tokens", str(args.tokens),
         "--token-ms", str(args.token_ms)],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/v1"
        wait_ready(f"{base}/models", server)
        if args.executor == "ray":
            ray_comparison(args, base, server.pid)
            return
        if args.sweep:
            sweep(args, base, server.pid)
            return
        if args.variants:
            with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
                asyncio.run(two_variants(args, base, Path(tmp)))
            return
        load_before = os.getloadavg()[0]
        bare_before = asyncio.run(bare_client(args, base))
        server_cpu = process_cpu(server.pid)
        with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
            figures = asyncio.run(measure(args, base, Path(tmp)))
        figures["server_cpu"] = process_cpu(server.pid) - server_cpu
        bare_after = asyncio.run(bare_client(args, base))
        load_after = os.getloadavg()[0]
    finally:
        server.terminate()
        server.wait(timeout=10)
    bare_wall = (bare_before[0] + bare_after[0]) / 2
    bare_cpu_ms = (bare_before[1] + bare_after[1]) / 2 / args.cases * 1000
    awf_cpu_ms = figures["cpu_per_conversation_ms"]
    print(f"{args.cases} conversations of {args.turns} agent replies with a simulated user, "
          f"{args.concurrency} in flight; {args.tokens} tokens per reply at {args.token_ms:g} ms "
          f"per token ({figures['model_time']:.2f}s of model time per conversation)")  # fmt: skip
    print(f"overhead         {figures['wall'] / bare_wall:.3f} (target <= 1.25): the eval "
          f"{figures['wall']:.2f}s ÷ the direct client {bare_wall:.2f}s (mean of "
          f"{bare_before[0]:.2f}s before and {bare_after[0]:.2f}s after)")  # fmt: skip
    floor = figures["ideal"]
    print(f"vs the floor     {floor:.2f}s (model time × cases ÷ concurrency): the eval "
          f"{figures['ratio']:.3f}, the direct client {bare_wall / floor:.3f}")  # fmt: skip
    print(f"CPU              awf {awf_cpu_ms:.1f} ms per conversation; the direct client "
          f"{bare_cpu_ms:.1f} ms; awf's own {awf_cpu_ms - bare_cpu_ms:.1f} ms")  # fmt: skip
    growth = figures["rss_growth_per_conversation_kib"]
    print(f"peak memory      {figures['peak_rss_mib']:.0f} MiB max RSS; "
          f"{growth:.0f} KiB of growth per conversation in flight")  # fmt: skip
    print(f"peak threads     {figures['peak_threads']}")
    print(f"fake server      {figures['server_cpu']:.1f}s of CPU during the eval")
    print(f"load average     {load_before:.2f} before, {load_after:.2f} after (1 minute)")


if __name__ == "__main__":
    main()
