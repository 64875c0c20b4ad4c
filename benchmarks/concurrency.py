"""Hundreds of conversations in flight in one process: threads, CPU and memory of awf runs.

An evaluation keeps hundreds of runs going at once in one process, each talking to a
model server. This drives real awf runs (`awf_nb.arun` with the openai_compatible
provider, a store on disk, as an evaluation would) concurrently on one event loop against
a local OpenAI-compatible server that is not itself the bottleneck: an asyncio server
(uvicorn, a raw ASGI app, a listen backlog of 4096) in its own process, streaming each
answer's tokens `--delay-ms` apart, so that every conversation is in flight at once.

It prints, from one run:

1. 200 concurrent single-turn runs, 50 tokens each: how many completed, and the peak
   number of threads in this process (`/proc/self/status`, sampled) — target <= 16;
2. 200 concurrent 4-turn conversations (a scripted person answers): how many completed,
   and awf's CPU time per turn against a bare `httpx.AsyncClient` script (its own
   process) sending the same requests — target ratio <= 1.5;
3. memory: the growth of this process's RSS while the conversations are in flight,
   per conversation — target <= 1 MiB;
4. the per-token relay: benchmarks/stream_overhead.py's marginal cost per token of
   `awf run` against benchmarks/bare_client.py (sync, and `--async`), whole processes,
   60,000 tokens, in wall time and in CPU time — target ratio <= 1.2.

    python benchmarks/concurrency.py [--runs 200] [--turns 4] [--tokens 50] [--delay-ms 10]
                                     [--host 127.0.0.1] [--no-relay]

`--host localhost` makes each new connection resolve a host name (in asyncio's default
executor, a thread pool): the threads that costs show in the first figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKFLOW = """
name: concurrency-bench
states:
  initial: chat
  chat:
    type: agent
    provider: openai_compatible
    mode: {mode}
    prompt: Hello there, how are you?
    options: {{base_url: "{url}", model: bench}}
    on_success: done
  done: {{type: terminal}}
"""
# What the scripted person says after the first turn (a 4-turn conversation: 3 of them).
PERSON = ["Tell me more.", "Why is that?", "Thanks, one last thing?"]


# --- the server (its own process) --------------------------------------------------------------


def serve(tokens: int, delay_ms: float) -> None:
    """An OpenAI-compatible streaming server: every POST gets `tokens` SSE events."""
    import uvicorn

    envelope = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","model":"bench",'
    events = [
        f'data: {envelope}"choices":[{{"index":0,"delta":{{"content":" t{i}"}},'
        '"finish_reason":null}]}\n\n'.encode()
        for i in range(tokens)
    ]
    usage = f'"usage":{{"prompt_tokens":20,"completion_tokens":{tokens}}}'
    tail = f'data: {envelope}"choices":[],{usage}}}\n\ndata: [DONE]\n\n'.encode()
    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")],
    }
    delay = delay_ms / 1000

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:  # the request body
            message = await receive()
            more = message.get("more_body", False)
        await send(start)
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
            if delay:
                await asyncio.sleep(delay)
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", backlog=4096, http="h11"
    )
    uvicorn.Server(config).run(sockets=[sock])


def start_server(tokens: int, delay_ms: float) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, __file__, "--serve", "--tokens", str(tokens)]
    proc = subprocess.Popen(
        [*command, "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"the benchmark server did not start: {url!r}")
    return proc, url


# --- the bare client (its own process) ---------------------------------------------------------


def bare(url: str, conversations: int, turns: int) -> None:
    """What a person would write by hand for the same conversations: one shared
    `httpx.AsyncClient`, each conversation a task sending its turns one after the other
    (the whole history each time) and decoding every event. Prints its CPU time."""
    import httpx

    async def conversation(client: httpx.AsyncClient) -> int:
        messages = [{"role": "user", "content": "Hello there, how are you?"}]
        for turn in range(turns):
            body = {"model": "bench", "messages": messages, "stream": True,
                    "stream_options": {"include_usage": True}}  # fmt: skip
            parts = []
            async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        for choice in json.loads(line[6:])["choices"]:
                            parts.append(choice["delta"].get("content") or "")
            messages += [{"role": "assistant", "content": "".join(parts)}]
            if turn < turns - 1:
                messages += [{"role": "user", "content": PERSON[turn % len(PERSON)]}]
        return turns

    async def main() -> list[int | BaseException]:
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            work = (conversation(client) for _ in range(conversations))
            return await asyncio.gather(*work, return_exceptions=True)

    asyncio.run(main())  # warm-up: imports, the first connections
    started = time.process_time()
    done = asyncio.run(main())
    cpu = time.process_time() - started
    failed = [repr(d) for d in done if not isinstance(d, int)]
    requests = sum(d for d in done if isinstance(d, int))
    print(json.dumps({"cpu": cpu, "requests": requests, "failed": failed[:3]}))


def run_bare(url: str, conversations: int, turns: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--bare", url, "--runs", str(conversations)]
    output = subprocess.run(
        [*command, "--turns", str(turns)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(output.stdout.strip().splitlines()[-1])


# --- awf, in this process ----------------------------------------------------------------------


class Sampler:
    """The peak thread count and RSS of this process, read from /proc every few ms."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.threads = 0
        self.rss = 0
        self.names: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def now() -> tuple[int, int]:
        fields = dict(
            line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
        )
        return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) * 1024

    def sample(self) -> None:
        threads, rss = self.now()
        if threads > self.threads:
            self.threads = threads
            self.names = Counter(_kind(t.name) for t in threading.enumerate())
        self.rss = max(self.rss, rss)

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    def __enter__(self) -> Sampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        assert self._task is not None
        self._task.cancel()


def _kind(name: str) -> str:
    """A thread's name without its number (`asyncio_3` -> `asyncio`)."""
    return name.rstrip("0123456789_-") or name


async def awf_runs(workflow: Any, store: Any, count: int, replies: list[str]) -> list[str]:
    from awf_nb.api import arun

    results = await asyncio.gather(
        *(arun(workflow, storage=store, replies=replies, show=False) for _ in range(count))
    )
    return [result.status for result in results]


def phase(workflow: Any, store: Any, count: int, replies: list[str]) -> dict[str, Any]:
    """`count` runs at once on a fresh event loop: statuses, CPU, peak threads and RSS."""

    async def main() -> dict[str, Any]:
        with Sampler() as sampler:
            before_rss = Sampler.now()[1]
            started = time.process_time()
            statuses = await awf_runs(workflow, store, count, replies)
            cpu = time.process_time() - started
        return {
            "completed": statuses.count("completed"),
            "statuses": Counter(statuses),
            "cpu": cpu,
            "threads": sampler.threads,
            "names": sampler.names,
            "rss_growth": sampler.rss - before_rss,
        }

    return asyncio.run(main())


def relay(rounds: int, *, cpu: bool) -> tuple[float, float, float]:
    """Per-token cost of the bare sync and async clients and of `awf run` (µs)."""
    from benchmarks.startup import compile_bytecode
    from benchmarks.stream_overhead import per_token

    compile_bytecode()
    return per_token(rounds, cpu=cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--host", default="127.0.0.1", help="how the runs name the server")
    parser.add_argument("--relay", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--relay-rounds", type=int, default=3)
    parser.add_argument(
        "--profile", type=int, metavar="N", default=0,
        help="print the N functions awf's conversations spend most time in (cProfile)",
    )  # fmt: skip
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tokens, args.delay_ms)
        return
    if args.bare:
        bare(args.bare, args.runs, args.turns)
        return

    import awf_nb
    from awf_nb.store import Store

    server, url = start_server(args.tokens, args.delay_ms)
    url = url.replace("127.0.0.1", args.host)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            chat = awf_nb.load(
                _write(tmp, "chat.yaml", WORKFLOW.format(mode="conversation", url=url))
            )
            single = awf_nb.load(
                _write(tmp, "single.yaml", WORKFLOW.format(mode="single", url=url))
            )
            store = Store(Path(tmp) / "runs")
            person = PERSON[: args.turns - 1]
            phase(chat, store, 10, person)  # warm-up: imports, caches, the store's files
            conversations = phase(chat, store, args.runs, person)
            if args.profile:
                _profile(chat, store, args.runs, person, args.profile)
            singles = phase(single, store, args.runs, [])
            baseline = run_bare(url, args.runs, args.turns)
    finally:
        server.terminate()
        server.wait(10)
    turns = args.runs * args.turns
    awf_turn = conversations["cpu"] / turns * 1000
    bare_turn = baseline["cpu"] / max(baseline["requests"], 1) * 1000
    if baseline["failed"]:
        print(f"the bare client's conversations failed: {baseline['failed']}")
    print(f"server: uvicorn in its own process, {args.tokens} tokens per answer, "
          f"{args.delay_ms:g} ms apart; runs name it {args.host}")  # fmt: skip
    print(f"1. {args.runs} concurrent single-turn runs: {singles['completed']} completed; "
          f"peak threads in this process {singles['threads']} (target <= 16); "
          f"CPU {singles['cpu'] / args.runs * 1000:.1f} ms per run")  # fmt: skip
    print(f"   threads at the peak: {_names(singles['names'])}")
    print(f"2. {args.runs} concurrent {args.turns}-turn conversations: "
          f"{conversations['completed']} completed; peak threads {conversations['threads']}; "
          f"CPU per turn: awf {awf_turn:.2f} ms, bare httpx.AsyncClient {bare_turn:.2f} ms, "
          f"ratio {awf_turn / bare_turn:.2f} (target <= 1.5)")  # fmt: skip
    growth = conversations["rss_growth"] / args.runs / 1024
    print(f"3. memory: RSS grew {conversations['rss_growth'] / 2**20:.1f} MiB with "
          f"{args.runs} conversations in flight: {growth:.0f} KiB each "
          "(target <= 1024 KiB)")  # fmt: skip
    if args.relay:
        for cpu in (False, True):
            sync_token, async_token, awf_token = relay(args.relay_rounds, cpu=cpu)
            print(f"{'   ' if cpu else '4.'} per-token relay, 60,000 tokens, whole processes, "
                  f"{'CPU' if cpu else 'wall'} time (median of {args.relay_rounds}): awf run "
                  f"{awf_token:.1f} µs; bare sync client {sync_token:.1f} µs, ratio "
                  f"{awf_token / sync_token:.2f} (target <= 1.2); bare async client "
                  f"{async_token:.1f} µs, ratio {awf_token / async_token:.2f}")  # fmt: skip
    if conversations["completed"] != args.runs or singles["completed"] != args.runs:
        print(f"   not all completed: {dict(conversations['statuses'])}, "
              f"{dict(singles['statuses'])}")  # fmt: skip


def _profile(workflow: Any, store: Any, count: int, replies: list[str], top: int) -> None:
    """The conversations once more, under cProfile (slower: its figures are relative)."""
    import cProfile
    import pstats

    profile = cProfile.Profile(time.process_time)  # CPU time, not time waited
    profile.enable()
    phase(workflow, store, count, replies)
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def _write(folder: str, name: str, text: str) -> Path:
    path = Path(folder) / name
    path.write_text(text)
    return path


def _names(names: Counter[str]) -> str:
    return ", ".join(f"{name} × {count}" if count > 1 else name for name, count in names.items())


if __name__ == "__main__":
    main()
