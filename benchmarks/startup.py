"""Start-up cost of the `awf` command, as a user feels it: whole processes, measured from
outside, each against `python -c pass` run alternately in the same loop (so machine noise
hits both sides alike). Prints the median wall time of each and the ratio.

Rows: `awf --version`, `awf validate workflows/chat.yaml`, `awf history`, `awf status ID`
(on a storage folder holding one finished run), `awf diagram workflows/chat.yaml`. Then the
floors those commands stand on, measured the same way: importing the libraries the workflow
and state files are read with (pydantic, PyYAML), importing the workflow models (what
`validate` stands on) and the run state's models (what `status` stands on).

    python benchmarks/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = [sys.executable, "-c", "pass"]


def compile_bytecode() -> None:
    """Write the package's .pyc files, as installing it does. Warm-up runs alone may not:
    with PYTHONDONTWRITEBYTECODE set, every edited module would be compiled again on every
    run and counted as start-up."""
    compileall.compile_dir(ROOT / "awf_nb", quiet=1)


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    compile_bytecode()
    awf = [sys.executable, "-m", "awf_nb.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AWF_STORAGE": tmp, "PYTHONPATH": str(ROOT)}
        finished = subprocess.run(
            [*awf, "run", "workflows/session-demo.yaml", "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        run_id = next(line for line in finished.stdout.split('"') if line.count("-") == 2)
        rows = {
            "awf --version": [*awf, "--version"],
            "awf validate chat.yaml": [*awf, "validate", "workflows/chat.yaml"],
            "awf history": [*awf, "history"],
            "awf status RUN": [*awf, "status", run_id],
            "awf diagram chat.yaml": [*awf, "diagram", "workflows/chat.yaml"],
            "floor: import pydantic, yaml": [sys.executable, "-c", "import pydantic, yaml"],
            "floor: + the workflow models": [
                sys.executable, "-c", "import yaml, awf_nb.workflow.model",
            ],
            "floor: the state models": [sys.executable, "-c", "import awf_nb.engine.state"],
        }  # fmt: skip
        for argv in [BASELINE, *rows.values()]:
            timed(argv, env)  # warm-up: file caches
        baseline: list[float] = []
        measured: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, argv in rows.items():
                baseline.append(timed(BASELINE, env))
                measured[name].append(timed(argv, env))
    base = statistics.median(baseline)
    print(f"median of {args.rounds} rounds; baseline python -c pass: {base * 1000:.1f} ms")
    print(f"{'command':28} {'median ms':>10} {'ratio':>8}")
    for name, times in measured.items():
        median = statistics.median(times)
        print(f"{name:28} {median * 1000:10.1f} {median / base:8.2f}")


if __name__ == "__main__":
    main()
