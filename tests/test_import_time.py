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
HEAVY = ("IPython", "ipywidgets", "httpx", "httpx2", "pydantic")


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
        "from awf_nb.frontends.cli import build_parser; build_parser()",
        "import awf_nb.diagram",
        # `awf history` reads SQLite only; the state models come with `awf status`
        "from awf_nb.store import Store; Store('/nonexistent/awf-history').history()",
        "from awf_nb.frontends.terminal.text import describe_state",
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


def test_awf_version_imports_neither_the_parser_nor_a_command() -> None:
    modules = _imported(
        "import sys; sys.argv = ['awf', '--version']; "
        "from awf_nb.frontends.cli import entry; entry()"
    )
    ours = sorted(m for m in modules if m == "awf_nb" or m.startswith("awf_nb."))
    assert ours == ["awf_nb", "awf_nb._version", "awf_nb.frontends", "awf_nb.frontends.cli"]
    assert "argparse" not in modules


def test_awf_validate_loads_no_engine_provider_or_frontend_behind_the_cli() -> None:
    """Validating a file reads it with the workflow models; it does not load what runs a
    workflow: the engine's run loop and steps, a provider, the run set-up, traces, the
    notebook or terminal frontends, HTTP. (The engine's package and its `summary`
    formatting helpers, and the providers' registry of names, are what validation reads.)"""
    modules = _imported(
        "import sys; sys.argv = ['awf', 'validate', 'workflows/chat.yaml']; "
        "from awf_nb.frontends.cli import entry; entry()"
    )
    assert "awf_nb.workflow.loader" in modules, "nothing was validated"
    allowed = {"awf_nb.engine", "awf_nb.engine.summary", "awf_nb.providers"}
    unwanted = (
        "awf_nb.engine", "awf_nb.providers", "awf_nb.runs.setup", "awf_nb.traces",
        "awf_nb.frontends.notebook", "awf_nb.frontends.terminal", "awf_nb.tools",
        "httpx", "httpx2", "IPython",
    )  # fmt: skip
    loaded = sorted(
        m
        for m in modules
        if m not in allowed and any(m == u or m.startswith(f"{u}.") for u in unwanted)
    )
    assert loaded == [], f"awf validate loads {loaded}"


def test_awf_run_without_tools_or_cassette_loads_neither(tmp_path: Path) -> None:
    workflow = tmp_path / "hello.yaml"
    workflow.write_text(
        "name: hello\nstates:\n  initial: hi\n"
        "  hi: {type: step, command: echo hi, on_success: done}\n"
        "  done: {type: terminal}\n"
    )
    code = (
        "import sys; from awf_nb.cli import main; "
        f"sys.exit(main(['run', {str(workflow)!r}, '--storage', {str(tmp_path / 'runs')!r}]))"
    )
    modules = _imported(code)
    assert "awf_nb.engine.run" in modules, "the run did not happen"
    unused = ("awf_nb.tools", "awf_nb.providers.cassette", "mcp")
    inside = tuple(f"{name}." for name in unused)
    assert sorted(m for m in modules if m in unused or m.startswith(inside)) == []


def test_loading_a_workflow_builds_only_the_models_of_its_step_kinds() -> None:
    code = (
        "from awf_nb.workflow.loader import load_workflow; "
        "from awf_nb.workflow import model; "
        "load_workflow('workflows/chat.yaml'); "
        "print(sorted(n for n, c in model.STEP_CLASSES.items() if c.__pydantic_complete__))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.stdout.split("\n")[0] == "['agent', 'terminal']"
