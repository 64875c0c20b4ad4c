"""benchmarks/trace_overhead.py still runs on both of its models: the scripted provider and
streamed turns from the eval benchmark's fake model server (its own process, 127.0.0.1).
A few turns, one round: this checks the benchmark works, not its figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("provider", ["scripted", "openai"])
def test_the_overhead_benchmark_prints_the_three_modes(provider: str) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "trace_overhead.py"), "--turns", "3"]
    command += ["--rounds", "1", "--provider", provider, "--tokens", "5"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert ("openai_compatible, 5 tokens" if provider == "openai" else "scripted") in done.stdout
    for mode in ("off", "file", "file \\+ live OTLP/HTTP"):
        assert re.search(rf"CPU per model turn, traces {mode}: [0-9.]+ ms", done.stdout)
    assert done.stdout.count("ratio") == 2
    for mode in ("file", "file \\+ live OTLP/HTTP"):
        assert re.search(
            rf"tracing's own CPU per model turn, {mode}: [0-9.]+ ms, [0-9.]+ of the bare turn",
            done.stdout,
        )
    assert "load:" in done.stdout
