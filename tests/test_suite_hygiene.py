"""The test suite's own rules: a helper two test files need lives once, in tests/support.

A test module (test_*.py) or a conftest.py is not a library: importing one from another
file runs its module-level code twice under two names, hides where a helper lives, and
invites the next copy. This test fails when any file under tests/ imports one.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_test_module(dotted: str) -> bool:
    """Whether a dotted module name leads to a test module or a conftest."""
    return any(part.startswith("test_") or part == "conftest" for part in dotted.split("."))


def imports_of_test_modules(root: Path) -> list[str]:
    """Every `import` under `root` of a test module or conftest, as "path:line: module"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                # `from . import test_x` names the module in the imported names.
                modules = [base] if base else [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if is_test_module(module):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {module}")
    return found


def test_no_file_imports_a_test_module_or_a_conftest() -> None:
    assert imports_of_test_modules(TESTS) == [], (
        "move the helper to tests/support and import it from there"
    )


def test_the_check_sees_every_form_of_such_an_import(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        "import os\n"
        "from tests.support.cli import run_awf\n"
        "from tests.cli.test_terminal_pty import spawn\n"
        "from tests.tools.conftest import SECRET\n"
        "import tests.engine.test_tool_loop as loop\n"
        "from .test_panel import click\n"
        "from . import test_panel\n"
        "from cli_helpers import FakeCli\n"
    )

    assert imports_of_test_modules(tmp_path) == [
        "test_a.py:3: tests.cli.test_terminal_pty",
        "test_a.py:4: tests.tools.conftest",
        "test_a.py:5: tests.engine.test_tool_loop",
        "test_a.py:6: test_panel",
        "test_a.py:7: test_panel",
    ]
