"""Tokens/s of the `local` provider compared with calling llama-cpp-python directly.

Everything runs in one process on the same loaded model, with the same prompt, seed and
max_tokens. The paths alternate run by run, so a busy machine slows them equally, and each
run starts from an empty KV cache so every run evaluates the whole prompt. Prints each
path's median rate and first-token latency, and the median ratio of each run's rate to the
direct call next to it (target: the provider is within 5%, ratio >= 0.95).

Each path is one `async def (bench) -> Sample` registered in `PATHS`; a new path (e.g. a
one-step workflow through `awf_nb.run`) is one more function.

    python benchmarks/local_tokens.py [--runs 5] [--max-tokens 128] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from awf_nb.api import arun
from awf_nb.engine.events import AgentText
from awf_nb.engine.ports import Final, TextDelta, TurnRequest, Usage
from awf_nb.providers.local import (
    DEFAULT_REPEAT_PENALTY,
    DEFAULT_SEED,
    LoadedModel,
    LocalProvider,
    get_model,
)
from awf_nb.providers.local import default_model_path as smollm2_path

SYSTEM = "You are a helpful assistant."
PROMPT = "Write a long story about a dragon who learns to cook."


@dataclass(frozen=True)
class Bench:
    model: LoadedModel
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


async def via_llama_cpp(bench: Bench) -> Sample:
    """What a user of llama-cpp-python would write: a streamed chat completion."""
    llama = bench.model.llama
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    parts: list[str] = []
    first = 0.0
    finish = None
    with bench.model.lock:
        started = time.perf_counter()
        for chunk in llama.create_chat_completion(
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


async def via_provider(bench: Bench) -> Sample:
    """The same request through LocalProvider.stream (worker thread + event loop)."""
    turn = TurnRequest(prompt=PROMPT, system_prompt=SYSTEM, options=bench.options)
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


async def via_awf_run(bench: Bench) -> Sample:
    """A one-step workflow through `awf_nb.arun`: engine, events, state saved to disk."""
    source = WORKFLOW.format(
        system=json.dumps(SYSTEM), prompt=json.dumps(PROMPT), options=json.dumps(bench.options)
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


Measure = Callable[[Bench], Awaitable[Sample]]
PATHS: dict[str, Measure] = {
    "llama_cpp": via_llama_cpp,
    "provider": via_provider,
    "awf run": via_awf_run,
}
BASELINE = "llama_cpp"


async def measure(bench: Bench, runs: int) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in PATHS}
    for run in range(runs + 1):  # run 0 warms up every path and is not counted
        for name, path in PATHS.items():
            with bench.model.lock:
                bench.model.llama.reset()  # a cold KV cache: each run evaluates the prompt
            sample = await path(bench)
            if run:
                samples[name].append(sample)
    return samples


def report(bench: Bench, samples: dict[str, list[Sample]], runs: int) -> None:
    model = bench.model
    print(
        f"model {model.path.name}: loaded in {model.load_seconds:.2f} s "
        f"(n_ctx {model.n_ctx}, {bench.threads} threads)"
    )
    print(f"max_tokens {bench.max_tokens}, seed {DEFAULT_SEED}, {runs} alternating runs each")
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
    texts = {s.text for runs_of_path in samples.values() for s in runs_of_path}
    print(f"same text on every path and run: {'yes' if len(texts) == 1 else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    # Loaded exactly as the provider loads it, so both paths share this one object.
    model = get_model(smollm2_path(), 2048, args.threads)
    bench = Bench(model, args.max_tokens, args.threads)
    report(bench, asyncio.run(measure(bench, args.runs)), args.runs)


if __name__ == "__main__":
    main()
