"""The engine's cost per tool round, against the same HTTP exchange done by a bare client.

A fake OpenAI-compatible server on 127.0.0.1 plays a model that asks for one `Read` of a
small file per reply, ROUNDS times, then answers. awf runs it as a workflow (the
openai_compatible provider, the tool loop, the built-in Read, a real store on disk). Then a
bare synchronous httpx client sends the very same request bodies, one after the other, to
the same server scripted the same way, reading each streamed reply to its end. Prints the
time per round of each and their ratio (target <= 1.2).

The two alternate `--repeat` times (medians shown; the ratio is the median of each pair's
ratio), each starting from a collected heap, so that neither pays for garbage the other or
the warm-up left: a shared machine's noise is large next to a few milliseconds.

    python benchmarks/tools.py [--rounds 50] [--repeat 3]
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
    with httpx.Client(timeout=60) as client:
        for body in bodies:
            with client.stream("POST", f"{server.base_url}/chat/completions", json=body) as reply:
                for _line in reply.iter_lines():
                    pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of each")
    args = parser.parse_args()
    engines, bares = [], []
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as server:
        root = Path(tmp)
        (root / "notes.txt").write_text("water the tomatoes\n" * 20)
        engine_run(server, 3, root)  # warm up: imports, the first connection
        for _ in range(max(args.repeat, 1)):
            server.requests.clear()
            engines.append(engine_run(server, args.rounds, root))
            bodies = [request.body for request in server.requests]
            script(server, args.rounds)
            bares.append(bare_run(server, bodies))
    requests = args.rounds + 1
    engine, bare = statistics.median(engines), statistics.median(bares)
    ratio = statistics.median(e / b for e, b in zip(engines, bares, strict=True))
    runs = f", median of {len(engines)} runs each" if len(engines) > 1 else ""
    print(f"{args.rounds} tool rounds ({requests} requests), one Read each{runs}")
    print(f"awf (provider, tool loop, Read, store): {engine * 1000 / requests:.2f} ms per round")
    print(f"bare httpx client, same requests:       {bare * 1000 / requests:.2f} ms per round")
    print(f"ratio: {ratio:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()
