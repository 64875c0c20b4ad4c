"""The engine's cost per tool round, against the same rounds done by hand.

A fake OpenAI-compatible server on 127.0.0.1, in a process of its own as a model server
is (`--server-in-process` puts it in this one, as it once was), plays a model that asks
for one `Read` of a small file per reply, ROUNDS times, then answers. awf runs it as a workflow (the
openai_compatible provider, the tool loop, the built-in Read, a real store on disk).

The baseline is the direct call, what a person would write by hand for the same rounds
(as benchmarks/bare_client.py is for streaming), with the HTTP stack awf streams with:
`httpx.AsyncClient` on an event loop sends the very same request bodies, one after the
other, to the same server scripted the same way, decodes each streamed event, puts the
call's pieces together and runs it (opens and reads the file). That is the work no client
can skip: it has to read the call to run it. What awf does on top is what the figure
measures: the events for the frontend, masking, the transcript lines written as they
happen, the workspace checks of the path.

Why the async client and not a synchronous one: awf streams on an event loop because it
keeps many conversations in flight in one process (an eval, a notebook's runs), with no
thread each. A synchronous client does one exchange at a time on the calling thread and
skips the event loop's own cost (a wake-up per read, tasks, futures), which no client that
serves many conversations at once can skip; measured against it, the ratio would count
that choice of design as awf's overhead. The synchronous direct client is still timed and
its ratio printed, to show what the event loop costs on a single conversation.

For scale the same requests are also sent by a client that reads each reply's lines and
drops them (the HTTP exchange alone, no call run): awf's ratio to it is printed too.

A round is timed by the server: from one request's arrival to the next one's, which holds
everything a round costs (the reply streamed and read, the tool run, the transcript lines
written, the next request built and sent) and nothing a run pays once (loading the
workflow, the state checkpoints at its start and end with their fsyncs, the history row).
The ratio of awf's per-round time to the async direct client's is the figure (target
<= 1.2). The whole runs, start to end, are printed too: what a run costs once shows there,
spread over its rounds.

The clients take turns `--repeat` times (medians shown; each ratio is the median of each
turn's ratio), each starting from a collected heap, so that none pays for garbage another
or the warm-up left, and each taking each place in the order as often: a shared machine's
noise is large next to a few milliseconds, and the run that follows awf's pays for what
awf's left (caches, the server's threads).

    python benchmarks/tools.py [--rounds 50] [--repeat 21] [--mode conversation]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from awf_nb.runs import prepare_run  # noqa: E402
from awf_nb.runs.replies import ScriptedReader  # noqa: E402
from awf_nb.store import Store  # noqa: E402
from awf_nb.workflow.loader import load_text  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402

WORKFLOW = """
name: bench-tools
states:
  initial: work
  work:
    type: agent
    provider: openai_compatible
    mode: {mode}
    prompt: Read the notes again and again.
    options: {{base_url: "{url}", model: bench}}
    tools: {{builtin: [Read], max_rounds: 1000}}
    on_success: done
  done: {{type: terminal}}
"""


def script(server: OpenAIServer, rounds: int) -> None:
    read = {"name": "Read", "arguments": json.dumps({"path": "notes.txt"})}
    server.script(*(Reply.calls({**read, "id": f"call_{i}"}) for i in range(rounds)))
    server.script(Reply.text("All read."))


class ServerProcess:
    """The test server in a process of its own (as a model server always is), scripted
    and read back through a pipe: in this process its threads would compete with the
    clients for the interpreter."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        self.base_url: str = self._pipe.recv()

    def script(self, rounds: int) -> None:
        self._pipe.send(("script", rounds))
        self._pipe.recv()

    def take_requests(self) -> list[tuple[float, Any]]:
        """(arrival time, body) of each request since the last call."""
        self._pipe.send(("requests", 0))
        return self._pipe.recv()

    def close(self) -> None:
        self._pipe.send(None)
        self._process.join(10)


class InProcessServer:
    """The test server in this process (`--server-in-process`: how this was measured once)."""

    def __init__(self) -> None:
        self._server = OpenAIServer().start()
        self.base_url = self._server.base_url

    def script(self, rounds: int) -> None:
        script(self._server, rounds)

    def take_requests(self) -> list[tuple[float, Any]]:
        requests, self._server.requests = self._server.requests, []
        return [(request.received_at, request.body) for request in requests]

    def close(self) -> None:
        self._server.stop()


Server = ServerProcess | InProcessServer


def _serve(pipe: Any) -> None:
    with OpenAIServer() as server:
        pipe.send(server.base_url)
        while (command := pipe.recv()) is not None:
            if command[0] == "script":
                script(server, command[1])
                pipe.send(True)
            else:
                requests, server.requests = server.requests, []
                pipe.send([(request.received_at, request.body) for request in requests])


@dataclass
class Timing:
    whole: float  # seconds from start to end
    round: float  # seconds from one request's arrival at the server to the next one's


def rounds_of(server: Server, whole: float) -> Timing:
    arrivals = [arrival for arrival, _body in server.take_requests()]
    return Timing(whole, (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1))


def engine_run(server: Server, root: Path, mode: str = "single") -> float:
    """awf's run of the rounds scripted on `server`. A conversation ends after the reply
    (the person's input ends: nobody answers)."""
    runner = prepare_run(
        load_text(WORKFLOW.format(url=server.base_url, mode=mode)),
        storage=Store(root / "runs"),
        cwd=root,
        reader=ScriptedReader([]),
    ).runner
    gc.collect()
    started = time.perf_counter()
    state = asyncio.run(runner.execute())
    elapsed = time.perf_counter() - started
    assert state.status == "completed", state.error
    return elapsed


def direct_run(server: Server, bodies: list[object], workdir: Path) -> float:
    """The same requests with the synchronous `httpx.Client` (no event loop), each reply
    decoded and its calls run, with nothing else done."""
    gc.collect()
    started = time.perf_counter()
    # verify=False: the URL is plain http, and awf's client for it builds no TLS context
    # either (building one, the CA bundle read, costs tens of milliseconds per client).
    with httpx.Client(timeout=60, verify=False) as client:
        for body in bodies:
            calls: dict[int, dict[str, str]] = {}
            with client.stream("POST", f"{server.base_url}/chat/completions", json=body) as reply:
                for line in reply.iter_lines():
                    add_pieces(calls, line)
            run_calls(calls, workdir)
    return time.perf_counter() - started


def direct_async_run(server: Server, bodies: list[object], workdir: Path) -> float:
    """`direct_run` with `httpx.AsyncClient` on an event loop, as awf sends requests."""

    async def rounds() -> None:
        async with httpx.AsyncClient(timeout=60, verify=False) as client:
            for body in bodies:
                calls: dict[int, dict[str, str]] = {}
                url = f"{server.base_url}/chat/completions"
                async with client.stream("POST", url, json=body) as reply:
                    async for line in reply.aiter_lines():
                        add_pieces(calls, line)
                run_calls(calls, workdir)

    gc.collect()
    started = time.perf_counter()
    asyncio.run(rounds())
    return time.perf_counter() - started


def add_pieces(calls: dict[int, dict[str, str]], line: str) -> None:
    """The tool-call pieces of one SSE line, added to the calls they belong to."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return
    for choice in json.loads(line[6:])["choices"]:
        for piece in choice["delta"].get("tool_calls") or ():
            call = calls.setdefault(piece["index"], {"name": "", "arguments": ""})
            function = piece.get("function") or {}
            call["name"] = call["name"] or function.get("name", "")
            call["arguments"] += function.get("arguments", "")


def run_calls(calls: dict[int, dict[str, str]], workdir: Path) -> None:
    for call in calls.values():
        assert call["name"] == "Read"
        path = workdir / json.loads(call["arguments"])["path"]
        path.read_text(encoding="utf-8")


def exchange_run(server: Server, bodies: list[object]) -> float:
    """The same requests, each reply's lines read and dropped: the HTTP exchange alone."""
    gc.collect()
    started = time.perf_counter()
    with httpx.Client(timeout=60, verify=False) as client:
        for body in bodies:
            with client.stream("POST", f"{server.base_url}/chat/completions", json=body) as reply:
                for _line in reply.iter_lines():
                    pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--mode",
        choices=["single", "conversation"],
        default="single",
        help="the agent step's mode (a conversation step is saved with each reply)",
    )
    parser.add_argument("--repeat", type=int, default=21, help="turns each client takes")
    parser.add_argument(
        "--server-in-process",
        action="store_true",
        help="run the test server in this process (threads sharing the interpreter)",
    )
    args = parser.parse_args()
    engines: list[Timing] = []
    directs: list[Timing] = []
    async_directs: list[Timing] = []
    exchanges: list[Timing] = []
    server: Server = InProcessServer() if args.server_in_process else ServerProcess()
    with tempfile.TemporaryDirectory() as tmp, contextlib.closing(server):
        root = Path(tmp)
        (root / "notes.txt").write_text("water the tomatoes\n" * 20)
        server.script(3)
        engine_run(server, root, args.mode)  # warm up: imports, the first connection
        server.take_requests()
        server.script(args.rounds)
        engine_run(server, root, args.mode)  # the requests the clients send again
        bodies = [body for _arrival, body in server.take_requests()]
        clients: list[tuple[list[Timing], Callable[[], float]]] = [
            (engines, lambda: engine_run(server, root, args.mode)),
            (directs, lambda: direct_run(server, bodies, root)),
            (async_directs, lambda: direct_async_run(server, bodies, root)),
            (exchanges, lambda: exchange_run(server, bodies)),
        ]
        for turn in range(max(args.repeat, 1)):
            # Each takes each place in the order in turn: whoever comes right after awf's
            # run pays for what that left (caches, the server's threads), not always one.
            shift = turn % len(clients)
            for timings, run in clients[shift:] + clients[:shift]:
                server.script(args.rounds)
                timings.append(rounds_of(server, run()))
    requests = args.rounds + 1
    runs = f", median of {len(engines)} runs each" if len(engines) > 1 else ""
    where = "in this process" if args.server_in_process else "in its own process"
    print(f"{args.rounds} tool rounds ({requests} requests), one Read each, {args.mode} mode{runs}")
    print(f"the test server runs {where}")
    print("per round, from one request's arrival at the server to the next one's:")
    print(f"  awf (provider, tool loop, Read, store):      {_median(engines, 'round'):.2f} ms")
    print(
        f"  direct client, httpx.AsyncClient (as awf):   {_median(async_directs, 'round'):.2f} ms"
    )
    print(f"  ratio: {_ratio(engines, async_directs, 'round'):.2f} (target <= 1.2)")
    print(
        f"  the direct client with the synchronous httpx.Client: "
        f"{_median(directs, 'round'):.2f} ms, awf's ratio to it "
        f"{_ratio(engines, directs, 'round'):.2f} (no event loop: see the docstring)"
    )
    print(
        f"  for scale, the HTTP exchange alone (sync): {_median(exchanges, 'round'):.2f} ms "
        f"(awf's ratio to it {_ratio(engines, exchanges, 'round'):.2f})"
    )
    print("whole runs, start to end (a run's own start and end included), per request:")
    print(
        f"  awf {_median(engines, 'whole') / requests:.2f} ms, "
        f"direct (async) {_median(async_directs, 'whole') / requests:.2f} ms, "
        f"ratio {_ratio(engines, async_directs, 'whole'):.2f}; "
        f"direct (sync) {_median(directs, 'whole') / requests:.2f} ms, "
        f"ratio {_ratio(engines, directs, 'whole'):.2f}"
    )


def _median(timings: list[Timing], field: str) -> float:
    """The median of `field` over `timings`, in milliseconds."""
    return statistics.median(getattr(t, field) for t in timings) * 1000


def _ratio(engines: list[Timing], baselines: list[Timing], field: str) -> float:
    """The median of each turn's ratio of awf's `field` to the baseline's."""
    pairs = zip(engines, baselines, strict=True)
    return statistics.median(getattr(e, field) / getattr(b, field) for e, b in pairs)


if __name__ == "__main__":
    main()
