"""The package is type-checked: mypy, with the project's `[tool.mypy]` configuration
(pyproject.toml: strict in `engine`, `runs`, `workflow` and `evals`), reports nothing.

`python -m pytest` is what CI runs, so this test is how mypy runs in CI. mypy is a test
dependency (the `test` extra, pinned in awf_nb/constraints.txt): when it is missing the
test fails, naming the install command, rather than skipping.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The optional extras mypy reads the types of: a partial install fails here, naming them,
# rather than as "cannot find implementation or library stub" deep in mypy's output.
EXTRA_MODULES = {
    "ray": "ray",
    "acp": "acp",
    "otel": "opentelemetry.sdk",
    "local": "llama_cpp",
    "notebook": "anywidget",
}
# mypy checks ~250 modules; a cold run takes a minute or two on one shared core. The bound
# only catches a hung checker.
MYPY_TIMEOUT_S = 900


@pytest.mark.slow
def test_mypy_reports_nothing_on_the_package() -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is not installed: pip install -e '.[test]' -c awf_nb/constraints.txt"
    )
    missing = [extra for extra, module in EXTRA_MODULES.items() if not _installed(module)]
    assert not missing, (
        f"the package is type-checked against every optional extra; missing: {missing}: "
        "pip install -c awf_nb/constraints.txt -e '.[test,local,notebook,ray,acp,otel]'"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MYPY_TIMEOUT_S,
    )
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        return False
