"""The workload of `benchmarks/eval.py --sweep`, run through Inspect AI, for comparison.

Run by eval.py in a separate Python environment (Inspect AI is a benchmark-only
dependency, never one of awf's; installing it next to awf would change versions awf
pins): `--inspect-python /tmp/inspect-venv/bin/python`, a venv made with
`python -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai openai`.

Each sample is a conversation of `--turns` assistant replies with a simulated user between
them (the same model, given a persona, writes the user's next message), streamed from the
same fake server; one string scorer checks the conversation's length. `--concurrency`
samples (and as many connections) at once. Prints one JSON line: wall and CPU seconds of
the eval, this process's max RSS, the bytes this process asked the disk to write, and the
size of the log Inspect keeps.

    python benchmarks/inspect_eval.py --base-url URL [--cases 200] [--concurrency 50]
                                      [--turns 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path


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


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, get_model
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
    from inspect_ai.solver import Generate, TaskState, solver

    turns = args.turns

    @solver
    def with_simulated_user():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            user_model = get_model()
            persona = f"You want help with {state.metadata['topic']}."
            for reply in range(turns):
                state = await generate(state)
                if reply == turns - 1:
                    break
                seen = [ChatMessageSystem(content=persona)] + [
                    ChatMessageUser(content=m.text) for m in state.messages[-2:]
                ]
                said = await user_model.generate(seen)
                state.messages.append(ChatMessageUser(content=said.completion))
            return state

        return solve

    @scorer(metrics=[accuracy()])
    def full():  # type: ignore[no-untyped-def]
        async def score(state: TaskState, target: Target) -> Score:
            replies = sum(m.role == "assistant" for m in state.messages)
            return Score(value=CORRECT if replies == turns else INCORRECT)

        return score

    samples = [
        Sample(input=f"Help me with topic {i}", id=f"c{i}", metadata={"topic": f"topic {i}"})
        for i in range(args.cases)
    ]
    options = {
        "model": "openai/fake",
        "model_base_url": args.base_url,
        "model_args": {"streaming": True, "responses_api": False},
        "max_connections": args.concurrency,
        "max_samples": args.concurrency,
        "max_retries": 0,
        "display": "none",
    }
    with tempfile.TemporaryDirectory(prefix="inspect-bench-") as logs:
        # One sample first, not measured: Inspect's imports and set-up (awf's are not
        # measured either), so the figures are per conversation.
        eval(Task(dataset=samples[:1], solver=with_simulated_user(), scorer=full()),
             log_dir=f"{logs}/warm-up", **options)  # type: ignore[arg-type]  # fmt: skip
        task = Task(dataset=samples, solver=with_simulated_user(), scorer=full())
        written = disk_writes()
        rss_before = rss_mib()
        cpu = time.process_time()
        wall = time.perf_counter()
        [log] = eval(task, log_dir=f"{logs}/measured", **options)  # type: ignore[arg-type]
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
        written = disk_writes() - written
        kept = folder_bytes(Path(logs) / "measured")
    passed = (log.results.scores[0].metrics["accuracy"].value if log.results else 0) * args.cases
    print(json.dumps({
        "status": log.status, "passed": round(passed), "wall": wall, "cpu": cpu,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mib": rss_before,
        "written": written, "kept": kept,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
