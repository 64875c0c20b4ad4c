"""Tokens/s, first-token latency and memory of the `local` provider, whose model runs in a
process of its own, against llama-cpp-python called in the caller's own process (what
the provider did before it moved the model out).

Warm (the model loaded on both sides): the paths alternate run by run, so a busy machine
slows them equally; each run has its own system prompt (the same on every path), so every
path evaluates the whole prompt and no KV cache helps one of them. Prints each path's
median rate and first-token latency and the median ratio of each run's rate to the
in-process call next to it (target: >= 0.95).

Cold (a session's first token): fresh Python processes, alternating, from the start of the
process to the first streamed token — imports, start of the model process, load — against
awf's same generation code run in the caller's process. Target: the model process adds
<= 0.5 s. Memory: what the caller and the model process hold once the model is loaded.

    python benchmarks/local_tokens.py [--runs 5] [--cold-runs 5] [--max-tokens 128] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from awf_nb.api import arun
from awf_nb.engine.events import AgentText
from awf_nb.engine.ports import Final, TextDelta, TurnRequest, Usage
from awf_nb.providers.local import DEFAULT_REPEAT_PENALTY, DEFAULT_SEED, LocalProvider
from awf_nb.providers.local import default_model_path as smollm2_path
from awf_nb.providers.local_process import shared_process

PROMPT = "Write a long story about a dragon who learns to cook."


def system_prompt(run: int, path: str = "") -> str:
    # The run (and, for `awf run`, which follows the provider in the same model process) first:
    # no two turns share a prompt prefix that a KV cache could reuse.
    return f"Run {run}{path}. You are a helpful assistant."


@dataclass(frozen=True)
class Bench:
    llama: Any  # llama_cpp.Llama, loaded in this process
    max_tokens: int
    threads: int

    @property
    def options(self) -> dict[str, object]:
        return {"max_tokens": self.max_tokens, "threads": self.threads, "seed": DEFAULT_SEED}


@dataclass(frozen=True)
class Sample:
    tokens: int
    seconds: float  # from the request to the last token
    first_token: float
    text: str

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


async def in_process(bench: Bench, run: int) -> Sample:
    """llama-cpp-python in this process: a streamed chat completion, as a user writes it."""
    messages = [
        {"role": "system", "content": system_prompt(run)},
        {"role": "user", "content": PROMPT},
    ]
    parts: list[str] = []
    first = 0.0
    finish = None
    started = time.perf_counter()
    for chunk in bench.llama.create_chat_completion(
        messages,
        stream=True,
        max_tokens=bench.max_tokens,
        seed=DEFAULT_SEED,
        repeat_penalty=DEFAULT_REPEAT_PENALTY,  # the provider's default
    ):
        choice = chunk["choices"][0]
        if text := choice["delta"].get("content"):
            first = first or time.perf_counter() - started
            parts.append(text)
        finish = choice["finish_reason"] or finish
    elapsed = time.perf_counter() - started
    if finish != "length":
        raise SystemExit(f"the reply stopped early ({finish}): pick a prompt with a longer reply")
    return Sample(bench.max_tokens, elapsed, first, "".join(parts))


async def via_provider(bench: Bench, run: int) -> Sample:
    """The same request through LocalProvider.stream: the model process, over its pipe."""
    turn = TurnRequest(prompt=PROMPT, system_prompt=system_prompt(run), options=bench.options)
    provider = LocalProvider()
    first = 0.0
    tokens = 0
    text = ""
    started = time.perf_counter()
    async for event in provider.stream(turn):
        if isinstance(event, TextDelta):
            first = first or time.perf_counter() - started
        elif isinstance(event, Usage):
            tokens = event.output_tokens
        elif isinstance(event, Final):
            text = event.text
    elapsed = time.perf_counter() - started
    await provider.aclose()
    return Sample(tokens, elapsed, first, text)


WORKFLOW = """
name: local-bench
states:
  initial: ask
  ask:
    type: agent
    provider: local
    system_prompt: {system}
    prompt: {prompt}
    options: {options}
    on_success: done
  done: {{type: terminal}}
"""


class _FirstText:
    """An event sink that notes when the first streamed text arrives."""

    def __init__(self) -> None:
        self.at = 0.0

    def emit(self, event: object) -> None:
        if not self.at and isinstance(event, AgentText):
            self.at = time.perf_counter()


async def via_awf_run(bench: Bench, run: int) -> Sample:
    """A one-step workflow through `awf_nb.arun`: engine, events, state saved to disk."""
    source = WORKFLOW.format(
        system=json.dumps(system_prompt(run, "b")),
        prompt=json.dumps(PROMPT),
        options=json.dumps(bench.options),
    )
    sink = _FirstText()
    with tempfile.TemporaryDirectory() as storage:
        started = time.perf_counter()
        result = await arun(source, sink=sink, storage=storage)
        elapsed = time.perf_counter() - started
    if not result.ok:
        raise SystemExit(f"the workflow failed: {result.error}")
    step = result.steps["ask"]
    return Sample(step.tokens_output, elapsed, sink.at - started, step.output)


Measure = Callable[[Bench, int], Awaitable[Sample]]
PATHS: dict[str, Measure] = {
    "in-process": in_process,
    "provider": via_provider,
    "awf run": via_awf_run,
}
BASELINE = "in-process"


async def measure(bench: Bench, runs: int) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in PATHS}
    for run in range(runs + 1):  # run 0 warms up every path and is not counted
        for name, path in PATHS.items():
            sample = await path(bench, run)
            if run:
                samples[name].append(sample)
    return samples


def report_warm(bench: Bench, samples: dict[str, list[Sample]], runs: int) -> None:
    print(f"warm: max_tokens {bench.max_tokens}, {bench.threads} threads, {runs} alternating runs")
    baseline = samples[BASELINE]
    for name, runs_of_path in samples.items():
        rate = statistics.median(s.rate for s in runs_of_path)
        first = statistics.median(s.first_token for s in runs_of_path)
        # Each run is compared with the baseline run right next to it, so a change in the
        # machine's load during the benchmark cancels out.
        ratio = statistics.median(
            s.rate / b.rate for s, b in zip(runs_of_path, baseline, strict=True)
        )
        print(
            f"  {name:<10} {rate:7.1f} tokens/s   first token {first * 1000:6.1f} ms   "
            f"ratio {ratio:.3f}"
        )
    same = all(a.text == b.text for a, b in zip(samples["provider"], baseline, strict=True))
    print(f"  the provider's text is llama-cpp-python's, run by run: {'yes' if same else 'NO'}")


# --- cold: a session's first token, in fresh processes -----------------------------------

COLD_IN_PROCESS = """
import json, os, sys, threading, time
started = time.perf_counter()
from pathlib import Path
from awf_nb.engine.ports import Message, TextDelta
from awf_nb.providers import local, local_model

# awf's own generation code in the caller's process: what the provider did before.
options = local.parse_options({"max_tokens": 8, "threads": int(sys.argv[2])}).for_turn()
job = local_model.Job([Message("user", "Say hi.")], options, Path(sys.argv[1]))
cancel = threading.Event()
first = 0.0

def emit(event):
    global first
    if not first and isinstance(event, TextDelta):
        first = time.perf_counter() - started
        cancel.set()

local_model.run_turn(job, emit, cancel)
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
print(json.dumps({"first": first, "caller_rss": rss, "model_rss": 0}))
"""

COLD_PROVIDER = """
import asyncio, json, os, sys, time
started = time.perf_counter()
from awf_nb.engine.ports import TextDelta, TurnRequest
from awf_nb.providers.local import LocalProvider
from awf_nb.providers.local_process import shared_process

def rss(pid):
    return int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

async def main():
    turn = TurnRequest(prompt="Say hi.", options={"max_tokens": 8, "threads": int(sys.argv[2])})
    stream = LocalProvider().stream(turn)
    async for event in stream:
        if isinstance(event, TextDelta):
            first = time.perf_counter() - started
            break
    await stream.aclose()
    return first

first = asyncio.run(main())
print(json.dumps({"first": first, "caller_rss": rss(os.getpid()),
                  "model_rss": rss(shared_process().pid)}))
"""


def cold(runs: int, threads: int) -> None:
    model = str(smollm2_path())
    results: dict[str, list[dict[str, float]]] = {"in-process": [], "provider": []}
    for _ in range(runs):
        for name, code in (("in-process", COLD_IN_PROCESS), ("provider", COLD_PROVIDER)):
            done = subprocess.run(
                [sys.executable, "-c", code, model, str(threads)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"cold: a fresh process's first token, {runs} alternating runs each")
    medians = {}
    for name, samples in results.items():
        first = statistics.median(s["first"] for s in samples)
        caller = statistics.median(s["caller_rss"] for s in samples) / 2**20
        held = statistics.median(s["model_rss"] for s in samples) / 2**20
        medians[name] = first
        extra = f", model process {held:.0f} MiB" if held else ""
        print(f"  {name:<10} first token {first:.3f} s   caller {caller:.0f} MiB{extra}")
    added = medians["provider"] - medians["in-process"]
    print(f"  the model process adds {added:+.3f} s to a session's first token (target <= +0.5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    from llama_cpp import Llama

    llama = Llama(
        model_path=str(smollm2_path()),
        n_ctx=2048,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        seed=DEFAULT_SEED,
        verbose=False,
    )
    bench = Bench(llama, args.max_tokens, args.threads)
    report_warm(bench, asyncio.run(measure(bench, args.runs)), args.runs)
    llama.close()
    shared_process().close()
    cold(args.cold_runs, args.threads)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
