"""No import cycles between awf_nb's modules, held open by imports inside functions.

import-linter checks the layers (which package may import which); this checks the modules
of one layer: the graph of every `awf_nb` import, at module level or inside a function
(those under `if TYPE_CHECKING:` left out: they never run), has no cycle. An import
inside a function that closes a cycle works only as long as nobody calls it at import
time, and hides from the reader which module depends on which; the shared thing belongs
in a lower module (engine/branches.py, engine/operations/base.py), or is passed in
(workflow/checks.py's `calls_agents`).

The evaluation harness (`awf_nb.evals`) still has such cycles; they are listed here
until untied, and no other module may join them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Packages whose modules still import each other in a cycle (not yet untied).
KNOWN_CYCLIC_PACKAGES = ("awf_nb.evals",)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The awf_nb modules `name` imports anywhere but under `if TYPE_CHECKING:`."""
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                pending.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = name if is_package else name.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else base)
            pending.append(child)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    paths = {_module_name(p, root): p for p in (root / "awf_nb").rglob("*.py")}
    modules = set(paths)
    return {
        name: _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", modules)
        for name, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _known(group: list[str]) -> bool:
    return all(m.startswith(KNOWN_CYCLIC_PACKAGES) for m in group)


def test_no_module_imports_itself_back_through_others() -> None:
    bad = [group for group in cycles(import_graph(ROOT)) if not _known(group)]
    assert not bad, "import cycles (untie them: move the shared thing to a lower module):\n" + (
        "\n".join(" <-> ".join(group) for group in bad)
    )


def test_the_check_sees_a_cycle_made_by_an_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "awf_nb" / "engine"
    package.mkdir(parents=True)
    (tmp_path / "awf_nb" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from awf_nb.engine import high\n")
    (package / "high.py").write_text("from awf_nb.engine.low import f\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from awf_nb.engine import high\n"
    )
    assert cycles(import_graph(tmp_path)) == [["awf_nb.engine.high", "awf_nb.engine.low"]]
