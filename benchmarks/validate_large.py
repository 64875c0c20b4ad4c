"""How long `awf validate` takes on a 1,000-step workflow, in-process and as a command.

Generates a workflow of alternating command and agent steps whose templates read earlier
steps' output, with transitions (conditions) on the commands and one terminal, then times:

- `load_workflow` in-process (YAML parsing + models + every cross-step check), best and
  median of several runs, with the template/condition parse caches cleared before each run
  (what a fresh process pays) and kept (what a notebook re-validating a cell pays), plus
  the checks alone;
- `python -m awf_nb.cli validate FILE` in a subprocess (interpreter start-up included) and,
  for scale, `python -c pass`.

Usage: python benchmarks/validate_large.py [--steps N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from awf_nb.workflow import checks, expr, template  # noqa: E402
from awf_nb.workflow.loader import load_workflow  # noqa: E402


def clear_parse_caches() -> None:
    """Forget parsed templates and conditions, as a fresh `awf validate` process would."""
    for cached in (getattr(template, "_parse_cached", None), expr.parse):
        cache_clear = getattr(cached, "cache_clear", None)
        if cache_clear is not None:
            cache_clear()


def generate(steps: int) -> str:
    """A valid workflow: step i reads step i-1; commands branch on a condition."""
    lines = [
        "name: large",
        "description: generated for the validate benchmark",
        "inputs:",
        "  - name: topic",
        "    default: benchmarks",
        "states:",
        "  initial: s0",
    ]
    for i in range(steps):
        nxt = f"s{i + 1}" if i + 1 < steps else "done"
        lines.append(f"  s{i}:")
        if i % 2 == 0:
            previous = f" {{{{.states.s{i - 1}.Output | escape}}}}" if i else ""
            lines += [
                "    type: step",
                f"    command: echo {{{{.inputs.topic | escape}}}}{previous} {i}",
                "    timeout: 30s",
                "    transitions:",
                f"      - when: states.s{i}.ExitCode == 0 and inputs.topic != ''",
                f"        goto: {nxt}",
                "      - goto: failed",
            ]
        else:
            lines += [
                "    type: agent",
                "    provider: scripted",
                f'    prompt: "Step {i}: summarise {{{{.states.s{i - 1}.Output}}}}"',
                "    options:",
                "      replies: [ok]",
                f"    on_success: {nxt}",
                "    on_failure: failed",
            ]
    lines += [
        "  done:",
        "    type: terminal",
        '    message: "{{.states.s0.Output}}"',
        "  failed:",
        "    type: terminal",
        "    status: failure",
    ]
    return "\n".join(lines) + "\n"


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def subprocess_seconds(args: list[str], runs: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def call() -> None:
        subprocess.run(args, env=env, check=True, capture_output=True, timeout=120)

    return timed(call, runs)


def describe(label: str, seconds: list[float]) -> None:
    best, median = min(seconds), statistics.median(seconds)
    print(f"{label:<42} best {best * 1000:8.1f} ms   median {median * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large.yaml"
        path.write_text(generate(args.steps))
        size = path.stat().st_size
        wf = load_workflow(path)
        assert not wf.warnings, wf.warnings[:3]
        print(
            f"workflow: {len(wf.steps)} steps, {size / 1024:.0f} KiB, "
            f"{len(wf.source_text.splitlines())} lines"
        )

        def cold() -> None:
            clear_parse_caches()
            load_workflow(path)

        def cold_checks() -> None:
            clear_parse_caches()
            checks.check_workflow(wf)

        describe("in-process load + checks (cold caches)", timed(cold, args.runs))
        describe(
            "in-process load + checks (warm caches)", timed(lambda: load_workflow(path), args.runs)
        )
        describe("in-process checks alone (cold caches)", timed(cold_checks, args.runs))
        python = [sys.executable]
        describe(
            "subprocess `awf validate`",
            subprocess_seconds([*python, "-m", "awf_nb.cli", "validate", str(path)], args.runs),
        )
        describe(
            "subprocess `python -c pass` (floor)", subprocess_seconds([*python, "-c", "pass"], 3)
        )


if __name__ == "__main__":
    main()
