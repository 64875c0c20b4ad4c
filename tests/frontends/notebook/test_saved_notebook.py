"""A saved notebook shows its runs without a kernel: when a run ends, the panel's widget
view gives way to a static HTML rendering (and a text transcript), so `jupyter nbconvert
--to html`, GitHub and nbviewer show the steps, the conversation and the summary, with or
without the saved widget state. Executed for real by nbclient in the test venv's python3
kernel. (test_export_offline.py opens such an export in a browser with no network.)"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

CELL = """%%awf --reply "Sunny, about two square metres." --reply ""
name: garden
states:
  initial: build
  build:
    type: step
    command: echo soil-ready
    on_success: plan
  plan:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Plan my garden"
    options:
      replies: ["How much sun does it get?", "Then grow **tomatoes** <b>first</b>."]
    on_success: done
  done: {type: terminal, message: planted}
"""


def test_a_run_in_a_saved_notebook_reads_without_widgets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AWF_STORAGE", str(tmp_path / "storage"))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext awf_nb"),
        nbformat.v4.new_code_cell(CELL),
    ]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()

    live, output = notebook.cells[1].outputs
    # The live widget made way for the static copy: its output is left empty, so no
    # exporter draws a widget (blank without its JavaScript) even with the saved state.
    assert live["data"] == {"text/plain": ""}
    assert set(output["data"]) == {"text/html", "text/plain"}
    assert "widgets" in notebook.metadata
    html, _ = HTMLExporter().from_notebook_node(notebook)

    for shown in (
        "soil-ready",  # command output
        "Plan my garden",  # the prompt, as the first message
        "How much sun does it get?",  # a reply
        "Sunny, about two square metres.",  # the person's message
        "<strong>tomatoes</strong>",  # Markdown rendered
        "&lt;b&gt;first&lt;/b&gt;",  # raw HTML from the model still escaped
        "completed",  # the summary
    ):
        assert shown in html, shown
    assert '<script type="application/vnd.jupyter.widget-view+json">' not in html

    # The text form, for viewers and checkers that read text only: a transcript.
    transcript = output["data"]["text/plain"]
    for shown in (
        "  soil-ready",
        "  prompt: Plan my garden",  # the workflow's, not the person's
        "  you: Sunny, about two square metres.",
        "Then grow tomatoes <b>first</b>.",
        "planted",
    ):
        assert shown in transcript, transcript
