"""The layers of design.md, checked on every import in the package (function-local and
TYPE_CHECKING ones included): data flows workflow -> engine -> providers + frontends.

- `workflow/` imports nothing from the engine, providers, frontends, store or api;
- `engine/` imports nothing from providers, frontends, tools, the store or api (it is
  given them);
- `tools/` (what an agent step's `tools:` block builds) imports no provider, frontend,
  store or api;
- `providers/` and `frontends/` never import each other;
- nothing outside `frontends/notebook/` imports IPython or ipywidgets.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "awf_nb"

# layer of a module (by its dotted name) -> prefixes it must not import
FORBIDDEN = {
    "awf_nb.workflow": (
        "awf_nb.engine", "awf_nb.providers", "awf_nb.frontends", "awf_nb.store", "awf_nb.api",
        "awf_nb.cli", "awf_nb.diagram",
    ),
    "awf_nb.engine": (
        "awf_nb.providers", "awf_nb.frontends", "awf_nb.tools", "awf_nb.store", "awf_nb.api",
        "awf_nb.cli",
    ),
    "awf_nb.tools": (
        "awf_nb.providers", "awf_nb.frontends", "awf_nb.store", "awf_nb.api", "awf_nb.cli",
    ),
    "awf_nb.providers": ("awf_nb.frontends", "awf_nb.store", "awf_nb.api", "awf_nb.cli"),
    "awf_nb.frontends": ("awf_nb.providers",),
    "awf_nb.diagram": ("awf_nb.engine", "awf_nb.providers", "awf_nb.frontends"),
    # evaluations sit beside the API: frontends render them, they never import one
    "awf_nb.evals": ("awf_nb.frontends", "awf_nb.cli", "awf_nb.eval_api", "awf_nb.tools"),
}  # fmt: skip
# modules of a layer that may reach a package the rest of the layer must not: the evals
# start runs (and reach providers and cassettes) through one adapter only
ONLY_THROUGH = {"awf_nb.providers": ("awf_nb.evals", "awf_nb.evals.run_setup")}
NOTEBOOK_ONLY = ("IPython", "ipywidgets", "ipykernel", "comm")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement anywhere in the source."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.split(".")
                if not is_package:
                    package = package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    problems = []
    for line, imported in imports_of(source, module, is_package):
        for layer, forbidden in FORBIDDEN.items():
            if module == layer or module.startswith(layer + "."):
                for prefix in forbidden:
                    if imported == prefix or imported.startswith(prefix + "."):
                        problems.append(f"{module}:{line} imports {imported}")
        for target, (layer, adapter) in ONLY_THROUGH.items():
            inside = module == layer or module.startswith(layer + ".")
            if (
                inside
                and module != adapter
                and (imported == target or imported.startswith(target + "."))
            ):
                problems.append(f"{module}:{line} imports {imported} (only {adapter} may)")
        top = imported.split(".")[0]
        if top in NOTEBOOK_ONLY and not module.startswith("awf_nb.frontends.notebook"):
            problems.append(f"{module}:{line} imports {imported} (notebook only)")
    return sorted(set(problems))


def test_no_module_imports_against_the_layers() -> None:
    problems: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += violations(module_name(path), path.read_text(), path.name == "__init__.py")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("awf_nb.engine.agent", "from awf_nb.providers.history import estimate_tokens"),
        ("awf_nb.engine.run", "def f():\n    from awf_nb.store import Store"),
        ("awf_nb.workflow.checks", "from awf_nb.engine import run"),
        ("awf_nb.frontends.terminal", "import awf_nb.providers.local"),
        ("awf_nb.providers.local", "from ..frontends import terminal"),
        ("awf_nb.engine.run", "import ipywidgets"),
        ("awf_nb.evals.driver", "from awf_nb.frontends.eval_terminal import console"),
        ("awf_nb.evals.scorers", "from awf_nb.providers import provider_factory"),
    ],
)
def test_the_check_catches_an_upward_import(module: str, source: str) -> None:
    assert violations(module, source), f"{source!r} in {module} was not caught"


# --- one process supervisor ------------------------------------------------------------------

# Where a program may be started other than through engine/process.py, and why (the module
# docstring of engine/process.py says the same).
PROCESS_STARTERS = {
    "awf_nb.engine.process": "the supervisor itself",
    "awf_nb.diagram": "Graphviz's dot, drawn outside any run by a package that has no engine",
    "awf_nb.tools.mcp_client": "the MCP SDK starts the server it speaks to",
}
_STARTS_A_PROCESS = re.compile(
    r"\bsubprocess\.(run|Popen|call|check_call|check_output)\b|create_subprocess_(exec|shell)"
    r"|\bsubprocess_exec\b|\bstdio_client\b|\bos\.(system|exec\w*|spawn\w*|posix_spawn\w*)\("
)


def process_starts(module: str, source: str) -> list[str]:
    if any(module == m or module.startswith(m + ".") for m in PROCESS_STARTERS):
        return []
    return [
        f"{module}:{number}: {line.strip()}"
        for number, line in enumerate(source.splitlines(), 1)
        if _STARTS_A_PROCESS.search(line) and not line.lstrip().startswith("#")
    ]


def test_programs_are_started_only_through_the_process_supervisor() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += process_starts(module_name(path), path.read_text())
    assert found == [], "start them with awf_nb.engine.process:\n" + "\n".join(found)


def test_the_process_check_catches_a_direct_start() -> None:
    source = 'import subprocess\nurl = subprocess.run(["git", "remote"]).stdout\n'
    assert process_starts("awf_nb.engine.operations.github", source) == [
        'awf_nb.engine.operations.github:2: url = subprocess.run(["git", "remote"]).stdout'
    ]
