"""Streaming overhead of `awf run` over a bare httpx client, on the same SSE stream.

A local OpenAI-compatible test server (tests/support/openai_server.py, in its own process)
streams N tokens per request. We time, in this process and alternating to share any
machine noise: (a) bare httpx clients — sync and async, a new client per run as a script
would — that read the stream and decode each SSE event, and (b) `awf run` of a one-step
agent workflow (the real CLI entry point, in-process, so interpreter start-up is excluded)
with the reply streamed to stdout (sent to /dev/null), its state saved to disk.
Prints the wall-time ratios (target <= 1.10) and the engine's added latency per token, for
a server that sends tokens as fast as it can (the worst case for overhead) and for one
that paces them (`--delay-ms`, default 1 ms/token: still 20x faster than a local model).

Then whole processes, as a user runs them (`--processes`, on by default): `awf run` of the
one-step workflow against `python benchmarks/bare_client.py` (a plain sync httpx script
printing each token) and its `--async` variant (the same with `httpx.AsyncClient`, as awf
streams), taking turns, for 1, 20,000 and 60,000 tokens; all print to a pipe.
Rows: the one-token difference (start-up and set-up; target <= +0.10 s), the 20,000-token
ratio (target <= 1.15) and the marginal cost per token, (t(60,000) - t(1)) / 59,999 on
each side (target ratio <= 1.2; against the async client too), in wall time and in CPU
time (user + system: on a busy machine the wall time counts the other processes' too).

    python benchmarks/stream_overhead.py [--tokens 2000] [--rounds 5] [--delay-ms 1]
                                         [--no-processes] [--process-rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from awf_nb.cli import main as awf_main  # noqa: E402
from benchmarks.startup import compile_bytecode, timed  # noqa: E402  (one way to time a process)

WORKFLOW = """
name: stream-bench
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    prompt: stream please
    options: {{base_url: "{url}", model: bench}}
    on_success: done
  done: {{type: terminal}}
"""


def start_server(tokens: int, delay_ms: float = 0) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "tests.support.openai_server", "--tokens", str(tokens)]
    proc = subprocess.Popen(
        [*command, "--delay-ms", str(delay_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"test server did not start: {url!r}")
    return proc, url.rstrip("/")


def bare_httpx(base_url: str) -> tuple[float, int]:
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    pieces = 0
    started = time.perf_counter()
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"{base_url}/chat/completions", json=body) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                    pieces += 1
    return time.perf_counter() - started, pieces


def _count(line: str) -> int:
    if line.startswith("data: ") and line != "data: [DONE]":
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
            return 1
    return 0


def bare_httpx_async(base_url: str) -> tuple[float, int]:
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "x"}]}

    async def read() -> int:
        pieces = 0
        async with (
            httpx.AsyncClient(timeout=60) as client,
            client.stream("POST", f"{base_url}/chat/completions", json=body) as response,
        ):
            async for line in response.aiter_lines():
                pieces += _count(line)
        return pieces

    started = time.perf_counter()
    pieces = asyncio.run(read())
    return time.perf_counter() - started, pieces


def through_awf(workflow: Path, storage: Path) -> float:
    started = time.perf_counter()
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),
        contextlib.redirect_stderr(null),
    ):
        code = awf_main(["run", str(workflow), "--storage", str(storage), "--output", "streaming"])
    elapsed = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"awf run failed with exit code {code}")
    return elapsed


def scenario(tokens: int, rounds: int, delay_ms: float) -> None:
    server, url = start_server(tokens, delay_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workflow = Path(tmp) / "wf.yaml"
            workflow.write_text(WORKFLOW.format(url=url))
            storage = Path(tmp) / "storage"
            bare_httpx(url)  # warm-up: imports, connections, caches
            bare_httpx_async(url)
            through_awf(workflow, storage)
            sync, asyn, awf = [], [], []
            for _ in range(rounds):
                elapsed, pieces = bare_httpx(url)
                assert pieces == tokens, pieces
                sync.append(elapsed)
                elapsed, pieces = bare_httpx_async(url)
                assert pieces == tokens, pieces
                asyn.append(elapsed)
                awf.append(through_awf(workflow, storage))
    finally:
        server.terminate()
        server.wait(5)
    s, b, a = (statistics.median(x) for x in (sync, asyn, awf))
    pace = f"{delay_ms:g} ms/token" if delay_ms else "as fast as possible"
    print(f"--- {tokens} tokens, server pace: {pace}, median of {rounds} rounds")
    print(f"bare httpx, sync client:   {s * 1000:8.1f} ms")
    print(f"bare httpx, async client:  {b * 1000:8.1f} ms")
    print(f"awf run, one agent step:   {a * 1000:8.1f} ms")
    print(f"ratio awf / bare async:    {a / b:8.3f}   (target <= 1.10)")
    print(f"ratio awf / bare sync:     {a / s:8.3f}")
    print(f"added latency per token:   {(a - b) / tokens * 1e6:8.1f} µs (vs async)")


def process_times(tokens: int, rounds: int, *, cpu: bool = False) -> tuple[float, float, float]:
    """Median wall times (`cpu`: CPU times, user + system) of the bare sync client, the
    bare async client and `awf run`, whole processes, taking turns."""
    server, url = start_server(tokens)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bare = [sys.executable, str(ROOT / "benchmarks" / "bare_client.py"), url]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workflow = Path(tmp) / "wf.yaml"
            workflow.write_text(WORKFLOW.format(url=url))
            env["AWF_STORAGE"] = str(Path(tmp) / "storage")
            awf = [sys.executable, "-m", "awf_nb.cli", "run", str(workflow)]
            commands = [bare, [*bare, "--async"], awf]
            for command in commands:  # warm-up: the page cache, the server
                timed(command, env)
            times: list[list[float]] = [[], [], []]
            for _ in range(rounds):
                for command, spent in zip(commands, times, strict=True):
                    spent.append(cpu_timed(command, env) if cpu else timed(command, env))
    finally:
        server.terminate()
        server.wait(5)
    sync, asyn, awf_time = (statistics.median(spent) for spent in times)
    return sync, asyn, awf_time


def cpu_timed(argv: list[str], env: dict[str, str]) -> float:
    """The CPU time (user + system) a whole process took: unlike its wall time, it does
    not count what other processes on a busy machine took meanwhile."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed(argv, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def per_token(
    rounds: int, tokens: int = 60_000, *, cpu: bool = False
) -> tuple[float, float, float]:
    """The marginal cost of a token, (t(tokens) - t(1)) / (tokens - 1), in µs, of the bare
    sync client, the bare async client and `awf run` (whole processes; `cpu`: CPU time)."""
    one = process_times(1, rounds, cpu=cpu)
    many = process_times(tokens, rounds, cpu=cpu)
    sync, asyn, awf = ((b - a) / (tokens - 1) * 1e6 for a, b in zip(one, many, strict=True))
    return sync, asyn, awf


def processes(rounds: int) -> None:
    compile_bytecode()
    print(f"--- whole processes (python …), median of {rounds} rounds, output to a pipe")
    times = {tokens: process_times(tokens, rounds) for tokens in (1, 20_000, 60_000)}
    (bare_1, async_1, awf_1), (bare_20k, _, awf_20k), (bare_60k, async_60k, awf_60k) = (
        times.values()
    )
    print(f"1 token:        bare {bare_1 * 1000:7.1f} ms   awf run {awf_1 * 1000:7.1f} ms   "
          f"+{(awf_1 - bare_1) * 1000:.0f} ms (target <= +100 ms)")  # fmt: skip
    print(f"20,000 tokens:  bare {bare_20k * 1000:7.1f} ms   awf run {awf_20k * 1000:7.1f} ms   "
          f"ratio {awf_20k / bare_20k:.2f} (target <= 1.15)")  # fmt: skip
    per_bare = (bare_60k - bare_1) / 59_999 * 1e6
    per_async = (async_60k - async_1) / 59_999 * 1e6
    per_awf = (awf_60k - awf_1) / 59_999 * 1e6
    print(f"per token:      bare {per_bare:7.1f} µs   awf run {per_awf:7.1f} µs   "
          f"ratio {per_awf / per_bare:.2f} (target <= 1.2)")  # fmt: skip
    print(f"                bare async client {per_async:5.1f} µs   "
          f"ratio {per_awf / per_async:.2f}")  # fmt: skip
    sync, asyn, awf = per_token(rounds, cpu=True)
    print(f"per token, CPU: bare {sync:7.1f} µs   awf run {awf:7.1f} µs   ratio {awf / sync:.2f}; "
          f"bare async client {asyn:.1f} µs, ratio {awf / asyn:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--processes", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--process-rounds", type=int, default=5)
    args = parser.parse_args()
    scenario(args.tokens, args.rounds, 0)
    if args.delay_ms:
        scenario(args.tokens, max(2, args.rounds // 2), args.delay_ms)
    if args.processes:
        processes(args.process_rounds)


if __name__ == "__main__":
    main()
