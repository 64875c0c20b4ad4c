"""Streaming overhead of `awf run` over a bare httpx client, on the same SSE stream.

A local OpenAI-compatible test server (tests/support/openai_server.py, in its own process)
streams N tokens per request. We time, in this process and alternating to share any
machine noise: (a) a bare httpx client that reads the stream and decodes each SSE event,
and (b) `awf run` of a one-step agent workflow (the real CLI entry point, in-process, so
interpreter start-up is excluded) with replies streamed to stdout (sent to /dev/null).
Prints the wall-time ratio b/a (target <= 1.10) and the engine's added latency per token.

    python benchmarks/stream_overhead.py [--tokens 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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


def start_server(tokens: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--tokens", str(tokens)],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server, url = start_server(args.tokens)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workflow = Path(tmp) / "wf.yaml"
            workflow.write_text(WORKFLOW.format(url=url))
            storage = Path(tmp) / "storage"
            bare_httpx(url)  # warm-up: imports, connections, caches
            through_awf(workflow, storage)
            bare, awf = [], []
            for _ in range(args.rounds):
                elapsed, pieces = bare_httpx(url)
                bare.append(elapsed)
                awf.append(through_awf(workflow, storage))
            assert pieces == args.tokens, pieces
    finally:
        server.terminate()
        server.wait(5)
    b, a = statistics.median(bare), statistics.median(awf)
    print(f"tokens streamed per run:        {args.tokens}")
    print(f"bare httpx client (median):     {b * 1000:.1f} ms")
    print(f"awf run, one agent step:        {a * 1000:.1f} ms")
    print(f"ratio awf/bare:                 {a / b:.3f} (target <= 1.10)")
    print(f"engine latency added per token: {(a - b) / args.tokens * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
