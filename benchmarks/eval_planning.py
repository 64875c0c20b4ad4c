"""Planning a big eval: memory and time until its first run starts, at a million runs.

Writes a throwaway project (a workflow whose step waits for a gate file, a dataset of
`--cases` rows) into a temporary folder, starts an eval of `--epochs` epochs over it
(cases x epochs runs, a million by default: the default `max_runs`), and prints:
- the time from `execute()` to the first run's start, and how many work items had been
  built by then (the plan builds each only when a worker takes it);
- the process's resident memory before the eval was prepared, once it was prepared (the
  dataset read, the folder written) and at its peak (ru_maxrss).
Then it cancels the eval and exits by itself.

    python benchmarks/eval_planning.py [--cases 10000] [--epochs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from awf_nb.evals.api import prepare_eval

GATED = """\
name: gated
inputs: [{name: topic}]
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f gate ]; do sleep 0.05; done'
    timeout: 600
    on_success: done
  done: {type: terminal}
"""


def rss_mb() -> float:
    """The resident memory now (from /proc/self/statm), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 1e6


class FirstRun:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    def eval_started(self, run: object) -> None: ...

    def run_started(self, case: str, epoch: int, run_id: str) -> None:
        self.started.set()

    def run_finished(self, row: object) -> None: ...

    def eval_finished(self, result: object) -> None: ...


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "gated.yaml").write_text(GATED)
        with (root / "cases.jsonl").open("w") as out:
            for i in range(args.cases):
                out.write(json.dumps({"id": f"case-{i}", "topic": f"topic {i}"}) + "\n")
        (root / "big.eval.yaml").write_text(
            f"workflow: gated.yaml\ndataset: cases.jsonl\nepochs: {args.epochs}\n"
            f'concurrency: 4\ninputs: {{topic: "{{{{.case.topic}}}}"}}\n'
            f"max_runs: {max(args.cases * args.epochs, 1)}\n"
        )
        before = rss_mb()
        run = prepare_eval(root / "big.eval.yaml", storage=root / "store", cwd=root)
        prepared = rss_mb()

        async def first_run() -> tuple[float, int]:
            progress = FirstRun()
            began = time.perf_counter()
            task = asyncio.create_task(run.execute(progress))
            await progress.started.wait()
            took = time.perf_counter() - began
            built = run.planned.built if run.planned is not None else -1
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return took, built

        took, built = asyncio.run(first_run())
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KB on Linux
        print(
            f"planned runs:            {run.total:,} ({args.cases:,} cases x {args.epochs} epochs)"
        )
        print(f"time to the first run:   {took * 1000:.0f} ms")
        print(f"work items built by then: {built}")
        print(f"memory before preparing: {before:.0f} MB")
        print(f"memory once prepared:    {prepared:.0f} MB")
        print(f"memory at its peak:      {peak:.0f} MB")


if __name__ == "__main__":
    main()
