"""The example notebooks are tests: nbval re-runs `notebooks/*.ipynb` in a real kernel and
compares every output with the one saved in the notebook (sanitized for run ids, times and
paths by `notebooks/nbval_sanitize.cfg`); and `jupyter nbconvert --execute`, without
`--allow-errors`, runs every one of them to the end. Both run headless, as they run for
anyone: nobody can type there, so conversations are replayed from their cassettes.

After a change that alters what the notebooks print, regenerate the saved outputs with
`scripts/refresh-notebooks` and review the diff.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ROOT / "notebooks"

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


def test_there_are_at_least_three_example_notebooks() -> None:
    assert len(sorted(NOTEBOOKS.glob("*.ipynb"))) >= 3


def environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("AWF_STORAGE", "AWF_NO_INTERACTIVE", "AWF_MODEL"):  # as anyone runs them
        env.pop(name, None)  # (the notebooks choose a temporary storage themselves)
    return env


def test_the_example_notebooks_pass_nbval(tmp_path: Path) -> None:
    env = environment()
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--nbval", str(NOTEBOOKS),
            "--nbval-sanitize-with", str(NOTEBOOKS / "nbval_sanitize.cfg"),
            "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
        ],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    print(result.stdout.strip().splitlines()[-1])


def test_nbconvert_runs_every_example_to_the_end_without_allowing_errors(tmp_path: Path) -> None:
    """A cell that is meant to fail says so (the `raises-exception` tag); nothing waits for
    a person."""
    notebooks = sorted(str(path) for path in NOTEBOOKS.glob("*.ipynb"))
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--output-dir", str(tmp_path), *notebooks],
        capture_output=True, text=True, env=environment(), timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-5000:]
    assert len(list(tmp_path.glob("*.ipynb"))) == len(notebooks)
