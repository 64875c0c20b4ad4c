"""A workflow as a graph of nodes and labelled edges, the one source of every diagram.

Every step becomes a node of its kind; routing becomes edges labelled with why they are
taken (`success`, `failure`, a transition's condition, `else`); parallel branches, loop
bodies (with the back-edge to the loop) and `on_complete` exits are edges too. An inline
`on_failure: {message, status}` gets a failure node of its own. The DOT and Mermaid writers
only decide how each kind and each edge looks. Every label is made safe to show
(`terminal_safe`): a command or a condition may hold control characters, and a diagram is
often printed on a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from awf_nb.safe_text import terminal_safe
from awf_nb.workflow.model import (
    AgentStep,
    AnyStep,
    CallWorkflowStep,
    CommandStep,
    ForEachStep,
    InlineFailure,
    OperationStep,
    ParallelStep,
    TerminalStep,
    WhileStep,
    Workflow,
)

NodeKind = Literal[
    "start", "command", "agent", "conversation", "parallel", "for_each", "while",
    "call_workflow", "operation", "success", "failure",
]  # fmt: skip
EdgeKind = Literal["start", "success", "failure", "transition", "branch", "body", "next", "done"]
Mark = Literal["current", "completed", "failed"]

START = "__start__"
DETAIL_CHARS = 40


@dataclass(frozen=True)
class Node:
    id: str  # the step name (or a synthetic name for start and inline failures)
    kind: NodeKind
    label: str  # the step name
    detail: str = ""  # a second, smaller line: provider, operation, command…


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: EdgeKind
    label: str = ""


@dataclass
class Graph:
    name: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    # parallel step -> its branches, drawn as a group
    groups: dict[str, list[str]] = field(default_factory=dict)

    def add_edge(self, edge: Edge) -> None:
        if edge not in self.edges:
            self.edges.append(edge)


def build_graph(workflow: Workflow) -> Graph:
    graph = Graph(terminal_safe(workflow.name))
    graph.nodes.append(Node(START, "start", ""))
    graph.add_edge(Edge(START, workflow.initial, "start"))
    for name, step in workflow.steps.items():
        node = _node(name, step)
        graph.nodes.append(
            replace(node, label=terminal_safe(node.label), detail=_short(node.detail))
        )
        _edges(graph, name, step)
    return graph


def _node(name: str, step: AnyStep) -> Node:
    if isinstance(step, TerminalStep):
        kind: NodeKind = "failure" if step.status == "failure" else "success"
        return Node(name, kind, name)
    if isinstance(step, AgentStep):
        if step.mode == "conversation":
            partner = step.conversation.partner if step.conversation else None
            other = "person" if partner is None else partner.name
            if partner is not None and partner.provider and "{{" not in partner.provider:
                other += f" ({partner.provider})"
            return Node(name, "conversation", name, _short(f"{step.provider} ⇄ {other}"))
        return Node(name, "agent", name, step.provider)
    if isinstance(step, CommandStep):
        return Node(name, "command", name, _short(step.command or step.script_file))
    if isinstance(step, ParallelStep):
        return Node(name, "parallel", name, step.strategy)
    if isinstance(step, ForEachStep):
        items = step.items if isinstance(step.items, str) else f"{len(step.items)} items"
        return Node(name, "for_each", name, _short(f"for each {items}"))
    if isinstance(step, WhileStep):
        return Node(name, "while", name, _short(f"while {step.while_}"))
    if isinstance(step, CallWorkflowStep):
        return Node(name, "call_workflow", name, _short(f"calls {step.workflow}"))
    if isinstance(step, OperationStep):
        return Node(name, "operation", name, step.operation)
    return Node(name, "command", name)


def _edges(graph: Graph, name: str, step: AnyStep) -> None:
    if isinstance(step, TerminalStep):
        return
    if isinstance(step, ParallelStep):
        graph.groups[name] = list(step.parallel)
        for branch in step.parallel:
            graph.add_edge(Edge(name, branch, "branch"))
    if isinstance(step, ForEachStep | WhileStep) and step.body:
        graph.add_edge(Edge(name, step.body[0], "body"))
        for before, after in zip(step.body, step.body[1:], strict=False):
            graph.add_edge(Edge(before, after, "body"))
        again = "next" if isinstance(step, WhileStep) else "next item"
        graph.add_edge(Edge(step.body[-1], name, "next", again))
        if step.on_complete:
            graph.add_edge(Edge(name, step.on_complete, "done", "done"))
    if step.on_success:
        graph.add_edge(Edge(name, step.on_success, "success"))
    if isinstance(step.on_failure, str):
        graph.add_edge(Edge(name, step.on_failure, "failure", "failure"))
    elif isinstance(step.on_failure, InlineFailure):
        failed = f"{name}__failed"
        graph.nodes.append(Node(failed, "failure", "failed", f"exit {step.on_failure.status}"))
        graph.add_edge(Edge(name, failed, "failure", "failure"))
    for transition in step.transitions:
        label = _short(transition.when) if transition.when else "else"
        graph.add_edge(Edge(name, transition.goto, "transition", label))


def _short(text: str | None) -> str:
    text = " ".join(terminal_safe(text or "").split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def check_steps(workflow: Workflow, names: Iterable[str]) -> list[str]:
    """The names that are not steps of `workflow` (for --highlight)."""
    return [name for name in names if name not in workflow.steps]
