"""The engine's cost per tool round, against the same HTTP exchange done by a bare client.

A fake OpenAI-compatible server on 127.0.0.1 plays a model that asks for one `Read` of a
small file per reply, ROUNDS times, then answers. awf runs it as a workflow (the
openai_compatible provider, the tool loop, the built-in Read, a real store on disk). Then a
bare synchronous httpx client sends the very same request bodies, one after the other, to
the same server scripted the same way, reading each streamed reply to its end.

A round is timed by the server: from one request's arrival to the next one's, which holds
everything a round costs (the reply streamed and read, the tool run, the transcript lines
written, the next request built and sent) and nothing a run pays once (loading the
workflow, the state checkpoints at its start and end with their fsyncs, the history row).
The ratio of the two per-round times is the figure (target <= 1.2). The whole runs, start
to end, are printed too: what a run costs once shows there, spread over its rounds.

The two alternate `--repeat` times (medians shown; each ratio is the median of each pair's
ratio), each starting from a collected heap, so that neither pays for garbage the other or
the warm-up left: a shared machine's noise is large next to a few milliseconds.

    python benchmarks/tools.py [--rounds 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from awf_nb.api import prepare_run  # noqa: E402
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


@dataclass
class Timing:
    whole: float  # seconds from start to end
    round: float  # seconds from one request's arrival at the server to the next one's


def rounds_of(server: OpenAIServer, whole: float) -> Timing:
    arrivals = [request.received_at for request in server.requests]
    server.requests.clear()
    return Timing(whole, (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1))


def engine_run(server: OpenAIServer, rounds: int, root: Path) -> float:
    script(server, rounds)
    runner = prepare_run(
        load_text(WORKFLOW.format(url=server.base_url)), store=Store(root / "runs"), cwd=root
    )
    gc.collect()
    started = time.perf_counter()
    state = asyncio.run(runner.execute())
    elapsed = time.perf_counter() - started
    assert state.status == "completed", state.error
    return elapsed


def bare_run(server: OpenAIServer, bodies: list[object]) -> float:
    """The same requests, each streamed to its end, with nothing else done."""
    gc.collect()
    started = time.perf_counter()
    # verify=False: the URL is plain http, and awf's client for it builds no TLS context
    # either (building one, the CA bundle read, costs tens of milliseconds per client).
    with httpx.Client(timeout=60, verify=False) as client:
        for body in bodies:
            with client.stream("POST", f"{server.base_url}/chat/completions", json=body) as reply:
                for _line in reply.iter_lines():
                    pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="alternating runs of each")
    args = parser.parse_args()
    engines: list[Timing] = []
    bares: list[Timing] = []
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as server:
        root = Path(tmp)
        (root / "notes.txt").write_text("water the tomatoes\n" * 20)
        engine_run(server, 3, root)  # warm up: imports, the first connection
        for _ in range(max(args.repeat, 1)):
            server.requests.clear()
            whole = engine_run(server, args.rounds, root)
            bodies = [request.body for request in server.requests]
            engines.append(rounds_of(server, whole))
            script(server, args.rounds)
            bares.append(rounds_of(server, bare_run(server, bodies)))
    requests = args.rounds + 1
    runs = f", median of {len(engines)} runs each" if len(engines) > 1 else ""
    print(f"{args.rounds} tool rounds ({requests} requests), one Read each{runs}")
    engine = statistics.median(t.round for t in engines) * 1000
    bare = statistics.median(t.round for t in bares) * 1000
    print("per round, from one request's arrival at the server to the next one's:")
    print(f"  awf (provider, tool loop, Read, store): {engine:.2f} ms")
    print(f"  bare httpx client, same requests:       {bare:.2f} ms")
    print(f"  ratio: {_ratio(engines, bares, 'round'):.2f} (target <= 1.2)")
    engine = statistics.median(t.whole for t in engines) * 1000 / requests
    bare = statistics.median(t.whole for t in bares) * 1000 / requests
    print("whole runs, start to end (a run's own start and end included), per request:")
    print(f"  awf {engine:.2f} ms, bare {bare:.2f} ms, ratio {_ratio(engines, bares, 'whole'):.2f}")


def _ratio(engines: list[Timing], bares: list[Timing], field: str) -> float:
    pairs = zip(engines, bares, strict=True)
    return statistics.median(getattr(e, field) / getattr(b, field) for e, b in pairs)


if __name__ == "__main__":
    main()
