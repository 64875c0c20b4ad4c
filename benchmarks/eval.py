"""An eval's own cost at scale: many simulated conversations in one process.

Runs an eval of N cases, each a conversation of `--turns` agent replies with a simulated
user, both on a local fake model server in its own process (Starlette on uvicorn) that is
paced like a model: `--token-ms` per token, `--tokens` per reply. Prints, from one run:

1. wall time ÷ the ideal (model time × cases ÷ concurrency), where model time is what one
   conversation spends waiting for the server (replies × tokens × token time): how close
   the one-process executor comes to keeping `--concurrency` conversations streaming;
2. awf's CPU time per conversation (this process: the engine, the store, the scorers);
3. peak memory (max RSS) and its growth over the eval, per conversation in flight;
4. peak threads of this process;
5. the same conversations made by a bare `httpx.AsyncClient` (no engine, no store, no
   simulated user's prompt building): its wall time ÷ the ideal too. On a busy machine
   both ratios grow; awf's ratio ÷ the bare client's is the engine's own share;
6. the fake server's CPU time, to see when it is the bottleneck.

    python benchmarks/eval.py [--cases 200] [--concurrency 50] [--turns 3]
                              [--tokens 40] [--token-ms 20]

With `--executor ray` (needs `pip install 'awf-nb[ray]'`), the same eval runs three times
instead: on the local executor, then on a Ray cluster with 1 and with 2 workers (each with
`--concurrency` runs in flight), and it prints, from that one run:

- the Ray path's set-up (connecting, starting the workers: until the first run starts);
- wall time per case after the set-up and the ratio to the ideal (`--concurrency` ×
  workers in flight), and the Ray path's overhead per case against the local executor;
- throughput (cases per second after the set-up) with 2 workers ÷ with 1;
- the driver's CPU per case (writing the rows and the runs the workers send back), the
  fake server's CPU, and how busy the machine's CPUs were: when they are all busy, the
  CPU — not Ray, not the model — is the bottleneck, and more workers cannot help.

The cluster is `--ray-address ADDR`, or one the benchmark starts for itself on this
machine (`ray start --head`, loopback only, 2 CPUs) and stops at the end.

A real store on disk is used (state files fsynced at every checkpoint), as `awf eval` does.
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
    import httpx

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
        def run_started(self, case: str, epoch: int, run_id: str) -> None:
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
    rss_before = rss_mib()
    cpu_before = time.process_time()
    wall_before = time.perf_counter()
    result = await run.execute(FirstStart())
    wall = time.perf_counter() - wall_before
    setup = first_start[0] - wall_before if first_start else 0.0
    cpu = time.process_time() - cpu_before
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
    }


async def bare_client(args: argparse.Namespace, base: str) -> float:
    """The same requests (replies per conversation in sequence, `--concurrency` at once)
    with a bare httpx client: the wall time ÷ the ideal."""
    import httpx

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
                    async with client.stream(
                        "POST", f"{base}/chat/completions", json=body
                    ) as response:
                        async for _line in response.aiter_lines():
                            pass

        started = time.perf_counter()
        await asyncio.gather(*(conversation() for _ in range(args.cases)))
        wall = time.perf_counter() - started
    ideal = replies * args.tokens * args.token_ms / 1000 * args.cases / args.concurrency
    return wall / ideal


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
        cluster.start()
        address = cluster.address
        os.environ.update(cluster.env)
    try:
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
    print(f"{'':10}{'set-up':>9}{'after':>9}{'ideal':>9}{'ratio':>8}{'per case':>11}"
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
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tokens, args.token_ms)
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
        server_cpu = process_cpu(server.pid)
        with tempfile.TemporaryDirectory(prefix="awf-eval-bench-") as tmp:
            figures = asyncio.run(measure(args, base, Path(tmp)))
        figures["server_cpu"] = process_cpu(server.pid) - server_cpu
        figures["bare_ratio"] = asyncio.run(bare_client(args, base))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.cases} conversations of {args.turns} agent replies with a simulated user, "
          f"{args.concurrency} in flight; {args.tokens} tokens per reply at {args.token_ms:g} ms "
          f"per token ({figures['model_time']:.2f}s of model time per conversation)")  # fmt: skip
    print(f"wall time        {figures['wall']:.2f}s; ideal {figures['ideal']:.2f}s; "
          f"ratio {figures['ratio']:.3f} (target <= 1.25)")  # fmt: skip
    print(f"awf CPU          {figures['cpu_per_conversation_ms']:.1f} ms per conversation")
    growth = figures["rss_growth_per_conversation_kib"]
    print(f"peak memory      {figures['peak_rss_mib']:.0f} MiB max RSS; "
          f"{growth:.0f} KiB of growth per conversation in flight")  # fmt: skip
    print(f"peak threads     {figures['peak_threads']}")
    print(f"fake server      {figures['server_cpu']:.1f}s of CPU during the eval")
    print(f"bare httpx       ratio {figures['bare_ratio']:.3f} on the same server; awf ÷ bare "
          f"{figures['ratio'] / figures['bare_ratio']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
