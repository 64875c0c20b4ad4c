"""`import awf_nb` stays fast and light: no IPython, ipywidgets, httpx or pydantic on import.

Measured with `python -X importtime` in a fresh interpreter (the second of two runs, so the
bytecode cache is warm), reading the cumulative time of the `awf_nb` line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("IPython", "ipywidgets", "httpx", "pydantic")
LIMIT_US = 150_000


def _importtime() -> dict[str, int]:
    """Module name -> cumulative import time in microseconds, for `import awf_nb`."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import awf_nb"],
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


def test_import_is_fast_and_pulls_in_nothing_heavy() -> None:
    _importtime()  # warm the bytecode cache
    modules = _importtime()
    assert "awf_nb" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], f"import awf_nb imports {heavy}"
    print(f"\nimport awf_nb: {modules['awf_nb'] / 1000:.1f} ms cumulative")
    assert modules["awf_nb"] < LIMIT_US
