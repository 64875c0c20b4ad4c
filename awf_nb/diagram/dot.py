"""Graphviz DOT text for a workflow graph (no Graphviz needed to write it)."""

from __future__ import annotations

from collections.abc import Mapping

from awf_nb.diagram.graph import Edge, Graph, Mark, Node

_SHAPES = {
    "start": 'shape=point, width=0.2, label=""',
    "command": "shape=box",
    "agent": 'shape=box, style="rounded"',
    "conversation": 'shape=box, style="rounded,bold", peripheries=2',
    "parallel": "shape=diamond",
    "for_each": "shape=hexagon",
    "while": "shape=hexagon",
    "call_workflow": "shape=folder",
    "operation": "shape=box3d",
    "success": 'shape=oval, style="filled", fillcolor="#c8e6c9"',
    "failure": 'shape=doubleoctagon, style="filled", fillcolor="#ffcdd2"',
}
_EDGES = {
    "start": "",
    "success": "",
    "failure": 'style=dashed, color="#c62828", fontcolor="#c62828"',
    "transition": "",
    "branch": "style=dotted, arrowhead=empty",
    "body": 'color="#1565c0"',
    "next": 'style=dashed, color="#1565c0", constraint=false',
    "done": "",
}
_MARKS = {
    "current": 'penwidth=3, color="#f57f17", style="filled,bold", fillcolor="#fff59d"',
    "completed": 'color="#2e7d32", penwidth=2',
    "failed": 'color="#c62828", penwidth=2, style="filled", fillcolor="#ffcdd2"',
}


def to_dot(graph: Graph, *, direction: str = "TB", marks: Mapping[str, Mark] | None = None) -> str:
    marks = marks or {}
    lines = [
        f"digraph {_quote(graph.name)} {{",
        f"  rankdir={direction};",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    grouped = {branch for branches in graph.groups.values() for branch in branches}
    by_id = {node.id: node for node in graph.nodes}
    for node in graph.nodes:
        if node.id not in grouped:
            lines.append("  " + _node(node, marks.get(node.id)))
    for parallel, branches in graph.groups.items():
        lines.append(f"  subgraph {_quote('cluster_' + parallel)} {{")
        lines.append(f'    label={_quote(parallel + " branches")}; style=dashed; color="#90a4ae";')
        lines.extend(
            "    " + _node(by_id[branch], marks.get(branch))
            for branch in branches
            if branch in by_id
        )
        lines.append("  }")
    lines.extend("  " + _edge(edge) for edge in graph.edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node(node: Node, mark: Mark | None) -> str:
    attributes = [_SHAPES[node.kind]]
    if node.kind != "start":
        attributes.append(f"label={_label(node)}")
    if mark:
        attributes.append(_MARKS[mark])
    return f"{_quote(node.id)} [{', '.join(attributes)}];"


def _label(node: Node) -> str:
    if not node.detail:
        return _quote(node.label)
    # An HTML-like label: the name, and the detail in a smaller, grey font.
    return (
        f"<{_html(node.label)}<BR/>"
        f'<FONT POINT-SIZE="9" COLOR="#546e7a">{_html(node.detail)}</FONT>>'
    )


def _edge(edge: Edge) -> str:
    attributes = [a for a in (_EDGES[edge.kind],) if a]
    if edge.label:
        attributes.insert(0, f"label={_quote(edge.label)}")
    suffix = f" [{', '.join(attributes)}]" if attributes else ""
    return f"{_quote(edge.source)} -> {_quote(edge.target)}{suffix};"


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _html(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )
