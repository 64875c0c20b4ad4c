"""`import awf_nb` and the `awf` command line stay light: no IPython, ipywidgets, httpx or
pydantic until a command needs them (so `awf --version` and `awf --help` are instant).

Checked with `python -X importtime` in a fresh interpreter: which modules were imported,
not how long it took (the time is a figure: benchmarks/startup.py prints it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("IPython", "ipywidgets", "httpx", "pydantic")


def _imported(code: str) -> dict[str, int]:
    """Module name -> cumulative import time in microseconds, for running `code`."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    modules: dict[str, int] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if cumulative.strip().isdigit():
            modules[name.strip()] = int(cumulative)
    return modules


@pytest.mark.parametrize(
    "code",
    [
        "import awf_nb",
        "from awf_nb.cli import build_parser; build_parser()",
        "import awf_nb.diagram",
        # `awf history` reads SQLite only; the state models come with `awf status`
        "from awf_nb.store import Store; Store('/nonexistent/awf-history').history()",
        "from awf_nb.frontends.terminal_text import describe_state",
    ],
    ids=["import", "cli-parser", "diagram-package", "history", "status-text"],
)
def test_pulls_in_nothing_heavy(code: str) -> None:
    modules = _imported(code)
    assert modules, "no import was recorded"
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], f"{code!r} imports {heavy}"
    if "awf_nb" in modules:
        print(f"\n{code}: {modules['awf_nb'] / 1000:.1f} ms cumulative")
