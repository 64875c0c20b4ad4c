"""Pictures of a workflow: Graphviz DOT and Mermaid text, and images through Graphviz.

`diagram(workflow, format=…)` is the one entry point used by `awf diagram`, the notebook
and the live run panel. DOT and Mermaid are written by the project itself (no dependency);
svg, png and pdf are drawn by Graphviz's `dot` program when it is installed.
`marks` colour steps by their state in a run (`current`, `completed`, `failed`);
`--highlight` marks steps as `current`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from awf_nb.engine.summary import format_duration
from awf_nb.errors import AwfSystemError, UserError

if TYPE_CHECKING:  # the model imports pydantic: only when a diagram is drawn
    from awf_nb.diagram.graph import Mark
    from awf_nb.workflow.model import Workflow

TEXT_FORMATS = ("dot", "mermaid")
IMAGE_FORMATS = ("svg", "png", "pdf")
FORMATS = TEXT_FORMATS + IMAGE_FORMATS
DIRECTIONS = ("TB", "LR", "BT", "RL")
GRAPHVIZ_SECONDS = 60

__all__ = ["DIRECTIONS", "FORMATS", "IMAGE_FORMATS", "TEXT_FORMATS", "diagram", "marks_for"]


def diagram(
    workflow: Workflow,
    *,
    format: str = "dot",
    direction: str = "TB",
    highlight: Iterable[str] = (),
    marks: Mapping[str, Mark] | None = None,
) -> str | bytes:
    """The workflow drawn in `format`: text for dot/mermaid (and svg), bytes for png/pdf."""
    from awf_nb.diagram.dot import to_dot
    from awf_nb.diagram.graph import build_graph, check_steps
    from awf_nb.diagram.mermaid import to_mermaid

    if format not in FORMATS:
        raise UserError(f"unknown diagram format {format!r}: use one of {', '.join(FORMATS)}")
    direction = direction.upper()
    if direction not in DIRECTIONS:
        raise UserError(f"unknown direction {direction!r}: use one of {', '.join(DIRECTIONS)}")
    highlight = list(highlight)
    if unknown := check_steps(workflow, highlight):
        raise UserError(_unknown_steps(workflow, unknown))
    all_marks: dict[str, Mark] = dict(marks or {})
    all_marks.update(dict.fromkeys(highlight, "current"))
    graph = build_graph(workflow)
    if format == "mermaid":
        return to_mermaid(graph, direction=direction, marks=all_marks)
    dot_text = to_dot(graph, direction=direction, marks=all_marks)
    if format == "dot":
        return dot_text
    image = render_with_graphviz(dot_text, format)
    return image.decode() if format == "svg" else image


def marks_for(statuses: Mapping[str, str], current: str = "") -> dict[str, Mark]:
    """Marks from step statuses of a run (`completed`, `failed`, …) and its current step."""
    marks: dict[str, Mark] = {}
    for name, status in statuses.items():
        if status == "completed":
            marks[name] = "completed"
        elif status in ("failed", "cancelled"):
            marks[name] = "failed"
    if current:
        marks[current] = "current"
    return marks


def render_with_graphviz(dot_text: str, format: str) -> bytes:
    """Run Graphviz's `dot -T<format>` on DOT text."""
    dot = shutil.which("dot")
    if dot is None:
        raise UserError(
            f"drawing {format} needs Graphviz's dot program, which is not installed: "
            "apt-get install graphviz (Debian/Ubuntu) or brew install graphviz (macOS). "
            "The dot and mermaid formats need nothing."
        )
    try:
        done = subprocess.run(
            [dot, f"-T{format}"],
            input=dot_text.encode(),
            capture_output=True,
            timeout=GRAPHVIZ_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AwfSystemError(
            f"Graphviz's dot took more than {format_duration(GRAPHVIZ_SECONDS)}"
        ) from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()
        raise AwfSystemError(f"Graphviz's dot failed (exit {done.returncode}): {detail}")
    return done.stdout


def _unknown_steps(workflow: Workflow, unknown: list[str]) -> str:
    from awf_nb.workflow.checks import did_you_mean

    parts = []
    for name in unknown:
        hint = did_you_mean(name, workflow.steps)
        parts.append(f'"{name}"' + (f" ({hint})" if hint else ""))
    return (
        f"--highlight: no step {', '.join(parts)} in workflow {workflow.name}; "
        f"its steps are: {', '.join(workflow.steps)}"
    )
