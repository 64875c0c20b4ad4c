"""Mermaid flowchart text for a workflow graph.

JupyterLab (4.1 and later) renders the `text/vnd.mermaid` MIME type itself, offline, so a
notebook can show a workflow with no extension and no network. Step names become node
ids only after sanitising (Mermaid ids are letters, digits and underscores), and every
label is quoted with Mermaid's entity escapes so any step name or condition is safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from awf_nb.diagram.graph import Edge, Graph, Mark, Node

# (opening, closing) brackets per node kind: Mermaid's shapes.
_SHAPES = {
    "start": ("((", "))"),
    "command": ("[", "]"),
    "agent": ("([", "])"),
    "conversation": ("([", "])"),
    "parallel": ("{", "}"),
    "for_each": ("{{", "}}"),
    "while": ("{{", "}}"),
    "call_workflow": ("[[", "]]"),
    "operation": ("[/", "/]"),
    "success": ("([", "])"),
    "failure": ("[(", ")]"),
}
_ARROWS = {
    "start": "-->",
    "success": "-->",
    "failure": "-.->",
    "transition": "-->",
    "branch": "-.-o",
    "body": "==>",
    "next": "-.->",
    "done": "-->",
}
# A light fill always comes with dark label text: Mermaid's dark theme (JupyterLab's dark
# theme) writes labels in a light colour, unreadable on these fills otherwise.
_CLASSES = {
    "success": "fill:#c8e6c9,stroke:#2e7d32,color:#1b1b1b",
    "failure": "fill:#ffcdd2,stroke:#c62828,color:#1b1b1b",
    "conversation": "stroke-width:3px",
    "current": "fill:#fff59d,stroke:#f57f17,stroke-width:4px,color:#1b1b1b",
    "completed": "stroke:#2e7d32,stroke-width:3px",
    "failed": "fill:#ffcdd2,stroke:#c62828,stroke-width:3px,color:#1b1b1b",
}
_DIRECTIONS = {"TB": "TB", "LR": "LR", "BT": "BT", "RL": "RL"}


def to_mermaid(
    graph: Graph, *, direction: str = "TB", marks: Mapping[str, Mark] | None = None
) -> str:
    marks = marks or {}
    ids = _ids(graph)
    lines = [f"flowchart {_DIRECTIONS[direction]}"]
    grouped = {branch for branches in graph.groups.values() for branch in branches}
    by_id = {node.id: node for node in graph.nodes}
    lines.extend("  " + _node(node, ids) for node in graph.nodes if node.id not in grouped)
    for number, (parallel, branches) in enumerate(graph.groups.items()):
        lines.append(f'  subgraph group{number}["{_text(parallel + " branches")}"]')
        lines.extend("    " + _node(by_id[b], ids) for b in branches if b in by_id)
        lines.append("  end")
    lines.extend("  " + _edge(edge, ids) for edge in graph.edges if edge.target in ids)
    used = {node.kind for node in graph.nodes} | set(marks.values())
    lines.extend(f"  classDef {name} {style}" for name, style in _CLASSES.items() if name in used)
    for kind in ("success", "failure", "conversation"):
        members = [ids[n.id] for n in graph.nodes if n.kind == kind]
        if members:
            lines.append(f"  class {','.join(members)} {kind}")
    for mark in ("completed", "failed", "current"):
        members = [ids[name] for name, m in marks.items() if m == mark and name in ids]
        if members:
            lines.append(f"  class {','.join(members)} {mark}")
    return "\n".join(lines) + "\n"


def _ids(graph: Graph) -> dict[str, str]:
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for node in graph.nodes:
        base = "s__start" if node.kind == "start" else "s_" + re.sub(r"\W", "_", node.id)
        candidate, number = base, 1
        while candidate in taken:
            number += 1
            candidate = f"{base}_{number}"
        taken.add(candidate)
        ids[node.id] = candidate
    return ids


def _node(node: Node, ids: Mapping[str, str]) -> str:
    opening, closing = _SHAPES[node.kind]
    if node.kind == "start":
        return f"{ids[node.id]}(( ))"
    label = _text(node.label)
    if node.detail:
        label += f"<br/><small>{_text(node.detail)}</small>"
    return f'{ids[node.id]}{opening}"{label}"{closing}'


def _edge(edge: Edge, ids: Mapping[str, str]) -> str:
    arrow = _ARROWS[edge.kind]
    label = f'|"{_text(edge.label)}"|' if edge.label else ""
    return f"{ids[edge.source]} {arrow}{label} {ids[edge.target]}"


def _text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: entity codes for the characters it parses."""
    replacements = {
        "&": "#amp;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "|": "#124;",
        "#": "#35;", "`": "#96;", "{": "#123;", "}": "#125;",
    }  # fmt: skip
    return "".join(replacements.get(char, char) for char in text)
