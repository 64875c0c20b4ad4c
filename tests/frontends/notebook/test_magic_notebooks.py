"""The example notebooks are tests: nbval re-runs `notebooks/*.ipynb` in a real kernel and
compares every output with the one saved in the notebook (sanitized for run ids, times and
paths by `notebooks/nbval_sanitize.cfg`).

After a change that alters what the notebooks print, regenerate the saved outputs with
`jupyter execute --inplace --allow-errors notebooks/*.ipynb` and review the diff.
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


def test_the_example_notebooks_pass_nbval(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AWF_STORAGE", None)  # the notebooks choose a temporary storage themselves
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
