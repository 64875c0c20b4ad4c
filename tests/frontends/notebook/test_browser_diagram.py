"""Workflow diagrams in a real JupyterLab: its own Mermaid renderer turns `%awf diagram`'s
output into an SVG, offline, with every step's name in it. This is the check that the
Mermaid text awf writes is accepted by the real Mermaid parser (a text it cannot parse
draws an error picture without the step names)."""

from __future__ import annotations

import re
import shutil
import urllib.parse
from typing import Any

import pytest

from awf_nb.workflow.loader import load_workflow
from tests.support.jupyterlab import JupyterLabServer, write_notebook
from tests.support.kernels import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

KERNEL_IDLE_MS = 60_000
RENDER_MS = 60_000
EVERY_KIND = REPO_ROOT / "tests" / "diagram" / "every-kind.yaml"


def open_and_run(page: Any, lab: JupyterLabServer, name: str, cells: list[str]) -> Any:
    write_notebook(lab.root / name, cells)
    page.goto(lab.notebook_url(name, workspace=name.removesuffix(".ipynb")))
    notebook = page.locator(".jp-NotebookPanel:visible")
    notebook.wait_for(timeout=KERNEL_IDLE_MS)
    idle = page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\|\s*Idle$"))
    idle.first.wait_for(timeout=KERNEL_IDLE_MS)
    notebook.locator(".jp-Cell .cm-content").first.click()
    for _ in cells:
        page.keyboard.press("Shift+Enter")
    return notebook


def rendered_text(notebook: Any, index: int = 0) -> str:
    """The SVG JupyterLab's Mermaid renderer drew (it shows it as a data: URL image)."""
    image = notebook.locator(".jp-RenderedMermaid img").nth(index)
    image.wait_for(timeout=RENDER_MS)
    source = image.get_attribute("src") or ""
    assert source.startswith("data:image/svg+xml,"), source[:80]
    svg = urllib.parse.unquote(source.removeprefix("data:image/svg+xml,"))
    assert "<svg" in svg
    return svg


@pytest.mark.parametrize(
    "workflow", [EVERY_KIND, REPO_ROOT / "workflows" / "chat.yaml"], ids=lambda p: p.stem
)
def test_awf_diagram_renders_every_step_in_jupyterlab(
    page: Any, lab: JupyterLabServer, workflow: Any
) -> None:
    shutil.copy(workflow, lab.root / workflow.name)
    notebook = open_and_run(page, lab, f"diagram-{workflow.stem}.ipynb", [
        "%load_ext awf_nb",
        f"%awf diagram {workflow.name}",
    ])  # fmt: skip
    text = rendered_text(notebook)
    for step in load_workflow(str(workflow)).steps:
        assert step in text, f"step {step} is not in the rendered diagram"


def test_cell_diagram_shows_without_running(page: Any, lab: JupyterLabServer) -> None:
    cell = "%%awf --diagram\n" + EVERY_KIND.read_text()
    notebook = open_and_run(page, lab, "cell-diagram.ipynb", ["%load_ext awf_nb", cell])
    text = rendered_text(notebook)
    assert "prepare" in text and "notify" in text
    assert notebook.locator(".awf-panel").count() == 0, "the workflow was not run"


SLOW = """name: slow
states:
  initial: first
  first: {type: step, command: "echo one", on_success: second}
  second: {type: step, command: "sleep 60", on_success: done}
  done: {type: terminal}
"""


def test_the_live_diagram_highlights_the_running_step(page: Any, lab: JupyterLabServer) -> None:
    notebook = open_and_run(page, lab, "live-diagram.ipynb", [
        "%load_ext awf_nb",
        "%%awf --no-wait\n" + SLOW,
    ])  # fmt: skip
    panel = notebook.locator(".awf-panel").first
    panel.locator(".awf-status").filter(has_text="second").first.wait_for(timeout=RENDER_MS)
    panel.get_by_role("button", name="Diagram").click()
    svg = rendered_text(panel)
    assert "first" in svg and "second" in svg
    assert "current" in svg  # the class Mermaid gives the highlighted (running) step
    panel.get_by_role("button", name="Cancel run").click()  # Stop only stops a reply
    panel.locator(".awf-status").filter(has_text="cancelled").first.wait_for(timeout=RENDER_MS)
