"""`%awf diagram` and `%%awf --diagram`: a workflow's picture in the notebook.

Shown as `text/vnd.mermaid`, which JupyterLab (4.1 and later) renders itself, offline, with
the Mermaid text as the plain-text fallback (what a saved notebook keeps for other
viewers). `--format svg` (or png, pdf) draws with Graphviz instead; `--format dot` shows the DOT
text; `-o FILE` writes the file, as `awf diagram` does.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from awf_nb.workflow.model import Workflow

MERMAID_MIME = "text/vnd.mermaid"


def diagram_bundle(
    workflow: Workflow,
    *,
    format: str = "mermaid",
    direction: str = "TB",
    highlight: Iterable[str] = (),
    marks: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The MIME bundle that shows `workflow` in a notebook."""
    from awf_nb.diagram import diagram

    drawing = diagram(
        workflow, format=format, direction=direction, highlight=highlight, marks=marks
    )
    if isinstance(drawing, bytes):  # png or pdf, drawn by Graphviz
        mime = "image/png" if format == "png" else "application/pdf"
        text = f"<{format} diagram of {workflow.name}>"
        return {mime: base64.b64encode(drawing).decode("ascii"), "text/plain": text}
    if format == "mermaid":
        return {MERMAID_MIME: drawing, "text/plain": drawing}
    if format == "svg":
        return {"image/svg+xml": drawing, "text/plain": f"<diagram of {workflow.name}>"}
    return {"text/plain": drawing}


def show_diagram(workflow: Workflow, **options: object) -> None:
    from IPython.display import display

    display(diagram_bundle(workflow, **options), raw=True)  # type: ignore[arg-type]
