"""The layers of docs/architecture.md, enforced.

- `lint-imports` (import-linter, contracts in pyproject.toml) must pass: every import in
  the package, function-level and TYPE_CHECKING ones included, follows the layers, and
  the forbidden edges (the package root's re-exports, frontends → providers/tools,
  IPython outside the notebook frontend, HTTP in the core) stay absent. Each contract is
  shown to catch the probe imports that broke the old check: a copy of the package gets
  one bad import and lint-imports must refuse it, naming the contract.
- What import-linter cannot see, checked here, each check tested against a planted
  violation: imports made at run time by name (`importlib.import_module` under any alias,
  `__import__`; only in `DYNAMIC_IMPORTS`) or through `sys.modules` (only in
  `SYS_MODULES_READERS`); strings naming a module of a higher layer (a registry's
  "module:Class"); names laundered through another package (a provider re-exported by
  `runs/` to a frontend); private names (`_name`) imported from another package; network
  clients outside the providers (`urllib.request`, `http.client`, sockets); and which modules `import awf_nb.engine` really loads (a fresh
  interpreter: no provider, frontend, IPython or httpx).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "awf_nb"

# Modules that import other modules by name at run time, and why.
DYNAMIC_IMPORTS = {
    # the provider registry: "module:Class" strings of its own table, loaded on first use
    "awf_nb/providers/__init__.py",
    # lazy attributes of the package: its own submodules only
    "awf_nb/workflow/__init__.py",
}


def lint_imports(package_parent: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """Run `lint-imports` on the `awf_nb` found in `package_parent` with the project's
    contracts (only `contracts`, by id, when given)."""
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    config = str(ROOT / "pyproject.toml")
    return subprocess.run(
        [sys.executable, "-c", code, config, "--no-cache", "--no-logo", *only],
        cwd=package_parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_every_import_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


TYPE_CHECKING_PROBE = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from awf_nb.runs import RunOptions
"""
# A frontend or an evaluation naming the engine's Runner, even for a type hint: they act
# on a run through its session and `RunControl` (awf_nb/runs/session.py).
RUNNER_TYPE_PROBE = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from awf_nb.engine.run import Runner
"""
PROBES = [
    # the engine reaching the Python API through the package's lazy re-exports
    ("awf_nb/engine/steps.py", "from awf_nb import arun", "package-root"),
    ("awf_nb/engine/agent.py", "from awf_nb.providers.history import estimate_tokens", "layers"),
    ("awf_nb/engine/run.py", "def f():\n    from awf_nb.store import Store", "layers"),
    ("awf_nb/workflow/checks.py", "from awf_nb.engine import run", "layers"),
    ("awf_nb/store/history.py", "from awf_nb.frontends import auto", "layers"),
    ("awf_nb/errors.py", "import awf_nb.api", "layers"),
    ("awf_nb/secrets.py", TYPE_CHECKING_PROBE, "layers"),
    ("awf_nb/providers/local.py", "from ..frontends import terminal", "layers"),
    ("awf_nb/tools/builtins.py", "from awf_nb.providers import provider_factory", "layers"),
    ("awf_nb/runs/options.py", "from awf_nb.frontends import auto", "layers"),
    ("awf_nb/frontends/terminal/sink.py", "from awf_nb.tools import builtins", "frontends-through-runs"),
    ("awf_nb/frontends/terminal/reader.py", "import awf_nb.providers.local", "frontends-through-runs"),
    ("awf_nb/engine/run.py", "import ipywidgets", "notebook-only"),
    ("awf_nb/store/history.py", "import httpx", "no-http-in-the-core"),
    ("awf_nb/store/history.py", "import httpx2", "no-http-in-the-core"),
    # evaluations reach providers only through their adapter, and never a frontend
    (
        "awf_nb/evals/scorers.py",
        "from awf_nb.providers import provider_factory",
        "evals-through-runs",
    ),
    ("awf_nb/evals/driver.py", "from awf_nb.frontends.terminal.eval_progress import console", "layers"),
    ("awf_nb/evals/driver.py", "from awf_nb.api import arun", "layers"),
    # a step module reaching the run loop by a relative import
    ("awf_nb/engine/steps.py", "from .run import Runner", "run-loop-through-runs"),
    ("awf_nb/frontends/terminal/eval_progress.py", "from awf_nb.engine.run import Runner",
     "run-loop-through-runs"),
    ("awf_nb/frontends/terminal/frontend.py", RUNNER_TYPE_PROBE, "run-loop-through-runs"),
    ("awf_nb/frontends/notebook/handle.py", RUNNER_TYPE_PROBE, "run-loop-through-runs"),
    ("awf_nb/evals/run_setup.py", RUNNER_TYPE_PROBE, "run-loop-through-runs"),
    # IPython in a terminal module, an existing one or a new one no contract names
    ("awf_nb/frontends/terminal/sink.py", "import IPython", "notebook-only"),
    ("awf_nb/frontends/terminal_extra.py", "import anywidget", "notebook-only"),
    ("awf_nb/frontends/terminal/eval_progress.py", "import ipykernel", "no-kernel-import"),
]  # fmt: skip


@pytest.mark.parametrize(("module", "probe", "contract"), PROBES, ids=[p[1] for p in PROBES])
def test_each_contract_refuses_its_probe_import(
    module: str, probe: str, contract: str, tmp_path: Path
) -> None:
    shutil.copytree(PACKAGE, tmp_path / "awf_nb", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / module  # a new module when it does not exist
    target.write_text((target.read_text() if target.exists() else "") + "\n" + probe + "\n")
    result = lint_imports(tmp_path, contract)
    report = result.stdout + result.stderr
    assert result.returncode != 0, f"{probe!r} in {module} was not caught:\n{report}"
    assert "1 broken" in report, report


# --- what import-linter cannot see ------------------------------------------------------------


def dynamic_imports(source: str) -> list[int]:
    """Lines that import a module by name at run time: a call of `import_module` or
    `__import__` under any name (`from importlib import import_module as load` binds
    `load`), or an `importlib.import_module` / `__import__` passed around as a value."""
    tree = ast.parse(source)
    loaders = {"import_module", "__import__"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("importlib", "builtins"):
            for alias in node.names:
                if alias.name in ("import_module", "__import__"):
                    loaders.add(alias.asname or alias.name)
                    lines.append(node.lineno)
    for node in ast.walk(tree):
        is_loader = isinstance(node, ast.Attribute) and node.attr in loaders
        if is_loader or (isinstance(node, ast.Name) and node.id in loaders):
            lines.append(node.lineno)
    return sorted(set(lines))


# Modules that look a module up in `sys.modules` (never to import one), and why.
SYS_MODULES_READERS = {
    # is IPython already loaded (are we in a kernel)? Importing it would cost 0.3 s
    "awf_nb/frontends/auto.py",
    # the running ipykernel's version, from the kernel that is already loaded
    "awf_nb/frontends/notebook/run_mode.py",
}


def sys_modules_uses(source: str) -> list[int]:
    """Lines that read or change `sys.modules` (a module got that way is invisible to
    lint-imports), however `sys` or `modules` was imported."""
    tree = ast.parse(source)
    sys_names, module_names = {"sys"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sys_names |= {a.asname for a in node.names if a.name == "sys" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            module_names |= {a.asname or a.name for a in node.names if a.name == "modules"}
    return sorted({
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == "modules"
            and isinstance(node.value, ast.Name) and node.value.id in sys_names)
        or (isinstance(node, ast.Name) and node.id in module_names)
    })  # fmt: skip


def test_modules_are_imported_by_name_only_where_listed() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative not in DYNAMIC_IMPORTS:
            found += [f"{relative}:{line}" for line in dynamic_imports(path.read_text())]
    assert found == [], "imports by name (invisible to lint-imports):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import importlib\nimportlib.import_module('awf_nb.providers')",
        "from importlib import import_module\nimport_module('awf_nb.frontends.terminal')",
        "__import__('awf_nb.api')",
        "from importlib import import_module as load\nload('awf_nb.frontends.terminal')",
        "import importlib as il\nloader = il.import_module\nloader('awf_nb.api')",
    ],
)
def test_an_import_by_name_is_caught(source: str) -> None:
    assert dynamic_imports(source)


def test_sys_modules_is_read_only_where_listed() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative not in SYS_MODULES_READERS:
            found += [f"{relative}:{line}" for line in sys_modules_uses(path.read_text())]
    assert found == [], "modules reached through sys.modules:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nterminal = sys.modules['awf_nb.frontends.terminal']",
        "import sys as system\nsystem.modules.get('awf_nb.api')",
        "from sys import modules\nmodules['awf_nb.api']",
    ],
)
def test_a_module_taken_from_sys_modules_is_caught(source: str) -> None:
    assert sys_modules_uses(source)


# --- module names in strings ------------------------------------------------------------------

# Modules that name a module of a higher layer in a string, and why.
STRING_NAMES = {
    # starts `python -m awf_nb.cli` as the MCP proxy's server: another process, not an import
    "awf_nb/tools/proxy.py",
    # Jupyter AI's persona starts `python -m awf_nb.cli acp`: another process too
    "awf_nb/frontends/jupyter_ai.py",
}
_MODULE_STRING = re.compile(r"awf_nb(?:\.\w+)+(?::\w+)?")


def layer_of() -> dict[str, int]:
    """Each top-level module's layer in the `layers` contract (0 is the top)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"
    ]
    return {name.strip(): index for index, layer in enumerate(layers) for name in layer.split("|")}


def upward_module_strings(module: str, source: str, layers: dict[str, int]) -> list[str]:
    """Strings in `module` that name (`pkg.mod` or `pkg.mod:Name`, as a registry does) a
    module of a layer above it: an import by name that lint-imports cannot see."""
    own = layers.get(module.split(".")[1]) if module.count(".") else None
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not _MODULE_STRING.fullmatch(node.value):
                continue
            target = layers.get(node.value.split(":")[0].split(".")[1])
            if own is not None and target is not None and target < own:
                found.append(f"{module}:{node.lineno}: {node.value!r}")
    return found


def test_no_string_names_a_module_of_a_higher_layer() -> None:
    layers = layer_of()
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(ROOT).as_posix() not in STRING_NAMES:
            found += upward_module_strings(module_name(path), path.read_text(), layers)
    assert found == [], "modules named in strings, above the module naming them:\n" + "\n".join(
        found
    )


def test_a_registry_string_naming_a_frontend_is_caught() -> None:
    source = 'PROVIDERS = {"panel": "awf_nb.frontends.notebook.panel:Panel"}\n'
    assert upward_module_strings("awf_nb.providers", source, layer_of()) == [
        "awf_nb.providers:1: 'awf_nb.frontends.notebook.panel:Panel'"
    ]
    same_layer = 'PROVIDERS = {"local": "awf_nb.providers.local:LocalProvider"}\n'
    assert upward_module_strings("awf_nb.providers", same_layer, layer_of()) == []


# --- re-exports -------------------------------------------------------------------------------

# What a package may not reach, even through a name another layer imported for it.
FORBIDDEN_REACH = {
    "awf_nb.frontends": ("awf_nb.providers", "awf_nb.tools"),
    "awf_nb.evals": ("awf_nb.providers", "awf_nb.tools", "awf_nb.frontends"),
}


def _module_file(module: str) -> Path | None:
    base = PACKAGE.parent / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def home_of(module: str, name: str, seen: int = 0) -> str:
    """The module where `module.name` is really defined, following `from … import` chains
    (TYPE_CHECKING ones too: they say where a lazy attribute comes from)."""
    path = _module_file(module)
    if path is None or seen > 20:
        return module
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(node, module, path.name == "__init__.py")
                    if source.startswith("awf_nb") and _module_file(f"{source}.{alias.name}"):
                        return f"{source}.{alias.name}"  # a submodule
                    if source.startswith("awf_nb"):
                        return home_of(source, alias.name, seen + 1)
                    return source
    return module


def laundered_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    """Names `module` imports through another package that are really defined where
    `module`'s package may not reach (FORBIDDEN_REACH). A direct import is not looked at:
    lint-imports' contracts judge those (and list the few allowed)."""
    forbidden = next((v for k, v in FORBIDDEN_REACH.items() if module.startswith(k + ".")), ())
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        origin = _absolute(node, module, is_package)
        if not origin.startswith("awf_nb") or origin.startswith(module.rsplit(".", 1)[0]):
            continue
        if any(origin == f or origin.startswith(f + ".") for f in forbidden):
            continue  # direct
        for alias in node.names:
            home = home_of(origin, alias.name)
            if any(home == f or home.startswith(f + ".") for f in forbidden):
                found.append(f"{module}:{node.lineno}: {alias.name} from {origin} is {home}")
    return found


def test_no_name_is_laundered_through_another_layer() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if any(module.startswith(k + ".") for k in FORBIDDEN_REACH):
            found += laundered_imports(module, path.read_text(), path.name == "__init__.py")
    assert found == [], "\n".join(found)


def test_a_provider_re_exported_through_runs_is_caught(tmp_path: Path) -> None:
    source = "from awf_nb.runs.setup import provider_factory\n"
    runs_setup = (PACKAGE / "runs" / "setup.py").read_text()
    assert "import provider_factory" in runs_setup or "provider_factory" in runs_setup
    assert laundered_imports("awf_nb.frontends.terminal", source) == [
        "awf_nb.frontends.terminal:1: provider_factory from awf_nb.runs.setup is "
        + home_of("awf_nb.runs.setup", "provider_factory")
    ]


# --- private names across packages ---------------------------------------------------------


def _package_of(module: str) -> str:
    """The package a module belongs to for this check: `awf_nb.evals.report.load` ->
    `awf_nb.evals`; a top-level module (`awf_nb.errors`) is its own."""
    return ".".join(module.split(".")[:2])


def private_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    """`from awf_nb.x import _name` where `awf_nb.x` is in another package than `module`:
    a private name is free to change with its module, so another package must not use it
    (give the name a public spelling in its package instead)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        origin = _absolute(node, module, is_package)
        if not origin.startswith("awf_nb") or _package_of(origin) == _package_of(module):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{module}:{node.lineno}: {alias.name} from {origin}")
    return found


def test_no_package_imports_another_package_s_private_names() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += private_imports(module_name(path), path.read_text(), path.name == "__init__.py")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    from awf_nb.workflow.loader.document import _plain\n",
        "from awf_nb.workflow.loader.model_errors import (\n    M,\n    _report,\n)\n",
    ],
)
def test_a_private_name_imported_across_packages_is_caught(source: str) -> None:
    assert private_imports("awf_nb.evals.loader", source) != []
    # within its own package, the same import is the package's own business
    assert private_imports("awf_nb.workflow.loader.api", source) == []


# --- network access outside providers ---------------------------------------------------------

# Where a connection may be opened other than by a provider, and why.
NETWORK_USERS = {
    # is the Ray cluster's address reachable, before an eval is created for it
    "awf_nb/evals/ray_connect.py",
    # a private Unix socket (0700 folder): an mcp_proxy step's environment handed to the
    # `awf mcp-serve` its agent CLI starts, so no secret is written to disk
    "awf_nb/tools/env_channel.py",
}
_NETWORK_MODULES = ("urllib.request", "http.client", "ftplib", "smtplib", "telnetlib")
_CONNECTS = ("create_connection", "socket", "open_connection", "create_server", "urlopen")


def network_uses(source: str) -> list[int]:
    """Lines importing a network client of the standard library, or opening a socket
    (`socket.socket`, `socket.create_connection`, `asyncio.open_connection`, …)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(a.name in _NETWORK_MODULES for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            named = {f"{node.module}.{a.name}" for a in node.names}
            if node.module in _NETWORK_MODULES or named & set(_NETWORK_MODULES):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                node.func.attr in _CONNECTS
                and isinstance(owner, ast.Name)
                and owner.id in ("socket", "asyncio", "request", "urllib")
            ):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_only_providers_open_network_connections() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("awf_nb/providers/") or relative in NETWORK_USERS:
            continue
        found += [f"{relative}:{line}" for line in network_uses(path.read_text())]
    assert found == [], "network access outside the providers:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1')",
        "from urllib import request\nrequest.urlopen('http://127.0.0.1')",
        "from http.client import HTTPConnection",
        "import socket\nsocket.create_connection(('127.0.0.1', 80))",
        "import asyncio\nasyncio.open_connection('127.0.0.1', 80)",
    ],
)
def test_network_access_is_caught(source: str) -> None:
    assert network_uses(source)


def test_importing_the_engine_loads_no_provider_frontend_notebook_or_http_module() -> None:
    code = (
        "import sys, awf_nb.engine, awf_nb.engine.run, awf_nb.engine.steps\n"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    loaded = result.stdout.split()
    assert "awf_nb.engine.run" in loaded, "the engine was not imported"
    unwanted = ("awf_nb.providers", "awf_nb.frontends", "awf_nb.tools", "awf_nb.api",
                "awf_nb.runs", "IPython", "ipywidgets", "httpx", "httpcore", "httpx2",
                "httpcore2")  # fmt: skip
    found = [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unwanted)]
    assert found == [], f"import awf_nb.engine loads {found}"


# --- the map ----------------------------------------------------------------------------------

MAP_PAGES = [ROOT / "docs" / "architecture.md", ROOT / "CONTRIBUTING.md"]


def paths_named(page: Path) -> list[str]:
    """Repository paths a page names: its relative links, and `awf_nb/…`, `tests/…`,
    `benchmarks/…`, `docs/…` written in backticks (a `NAME` placeholder is not a path)."""
    text = page.read_text()
    named = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            named.append(os.path.normpath(page.parent.relative_to(ROOT) / target))
    for quoted in re.findall(r"`((?:awf_nb|tests|benchmarks|docs|notebooks|\.ci)/[^`\s]*)`", text):
        named.append(quoted.rstrip("/"))
    return named


@pytest.mark.parametrize("page", MAP_PAGES, ids=[p.name for p in MAP_PAGES])
def test_every_path_the_map_names_exists(page: Path) -> None:
    named = paths_named(page)
    assert len(named) > 5, "no path found: the pattern no longer matches the page"
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == [], f"{page.name} names paths that do not exist: {missing}"


def test_the_map_names_every_top_level_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    modules = sorted(
        p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()
    )
    unnamed = [
        m
        for m in modules
        if m != "__init__.py"
        and f"awf_nb/{m}" not in text
        and f"awf_nb.{m.removesuffix('.py')}" not in text
    ]
    assert unnamed == [], f"docs/architecture.md does not place: {unnamed}"


STEP_MODULES = ("steps", "agent_step", "agent", "conversation", "partner", "tool_calls", "hooks")


def run_time_imports_of(source: str, target: str, module: str = "awf_nb.engine.x") -> list[int]:
    """Lines importing `target` anywhere but under `if TYPE_CHECKING:` (a function-level
    import is a run-time import too); relative imports are resolved from `module`."""
    tree = ast.parse(source)
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            typing_only |= {id(inner) for inner in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            origin = _absolute(node, module, False)
            imported = [origin, *(f"{origin}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        else:
            continue
        if target in imported:
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("name", STEP_MODULES)
def test_a_step_module_never_imports_the_run_loop(name: str) -> None:
    """Steps see the run through `engine/runtime.StepRun`; `engine/run.py` (the Runner) is
    imported by none of them at run time, only for type hints."""
    source = (PACKAGE / "engine" / f"{name}.py").read_text()
    assert run_time_imports_of(source, "awf_nb.engine.run", f"awf_nb.engine.{name}") == []


def test_the_check_sees_a_function_level_import_of_the_run_loop() -> None:
    source = "def f():\n    from awf_nb.engine.run import RunEnds\n"
    typed = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from awf_nb.engine.run import X\n"
    )
    relative = "def f():\n    from .run import Runner\n"
    package = "from . import run\n"
    assert run_time_imports_of(source, "awf_nb.engine.run") == [2]
    assert run_time_imports_of(relative, "awf_nb.engine.run", "awf_nb.engine.steps") == [2]
    assert run_time_imports_of(package, "awf_nb.engine.run", "awf_nb.engine.steps") == [1]
    assert run_time_imports_of(typed, "awf_nb.engine.run") == []


# --- one process supervisor ------------------------------------------------------------------

# Where a program may be started other than through engine/process.py, and why (the module
# docstring of engine/process.py says the same).
PROCESS_STARTERS = {
    "awf_nb.engine.process": "the supervisor itself",
    "awf_nb.frontends.terminal.debugger": "the person's $EDITOR at a breakpoint needs the "
    "terminal, in awf's own foreground process group",
    "awf_nb.diagram": "Graphviz's dot, drawn outside any run by a package that has no engine",
    "awf_nb.tools.mcp_client": "the MCP SDK starts the server it speaks to",
    "awf_nb.providers.local_process": "the model process serves every run and event loop "
    "of awf's process and outlives each run",
}
_STARTS_A_PROCESS = re.compile(
    r"\bsubprocess\.(run|Popen|call|check_call|check_output)\b|create_subprocess_(exec|shell)"
    r"|\bsubprocess_exec\b|\bstdio_client\b|\bos\.(system|exec\w*|spawn\w*|posix_spawn\w*)\("
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


# --- module size ------------------------------------------------------------------------------

LONG_MODULE_LINES = 600


def long_modules_without_a_reason(package: Path) -> list[str]:
    """Modules over `LONG_MODULE_LINES` lines whose docstring does not say why they are one
    module (a paragraph starting "Why one module:")."""
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        lines = source.count("\n")
        if lines > LONG_MODULE_LINES and "Why one module:" not in (
            ast.get_docstring(ast.parse(source)) or ""
        ):
            found.append(f"{path.relative_to(package.parent)} ({lines} lines)")
    return found


def test_a_module_over_600_lines_says_why_it_is_one_module() -> None:
    assert long_modules_without_a_reason(PACKAGE) == []


def test_the_size_check_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text('"""A big module."""\n' + "x = 1\n" * 700)
    (tmp_path / "pkg" / "said.py").write_text(
        '"""A big module.\n\nWhy one module: because.\n"""\n' + "x = 1\n" * 700
    )
    assert long_modules_without_a_reason(tmp_path / "pkg") == ["pkg/big.py (701 lines)"]
