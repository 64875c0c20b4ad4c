"""A saved notebook shows its runs to a reader with no kernel and no network: executed by
nbclient (as `jupyter nbconvert --execute` does, widget state saved), exported by
nbconvert's HTML exporter as it is, and opened in Chromium with every request to another
host refused. Every message of the conversation must be in the visible text of the
page's outputs.

The example notebooks in notebooks/ are checked the same way, as committed: no output
keeps a widget view (an exporter would draw it, blank offline), and each run's transcript
is on the exported page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from tests.support.kernels import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.kernel, pytest.mark.slow]

NOTEBOOKS = REPO_ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RUN_CELL = re.compile(r"^%%awf\b|^%awf (run|resume)\b", re.MULTILINE)

CONVERSATION = """%%awf --reply "Sunny, about two square metres." --reply "Beans, then." --reply ""
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
    prompt: "Plan my garden, please."
    options:
      replies:
        - "How much sun does it get?"
        - "Then grow tomatoes first."
        - "Beans climb: give them a pole."
    on_success: done
  done: {type: terminal, message: planted}
"""


def execute(cells: list[str], folder: Path) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    return notebook


def export_html(notebook: nbformat.NotebookNode, path: Path) -> Path:
    """`jupyter nbconvert --to html`, with its defaults (the lab template)."""
    html, _ = HTMLExporter().from_notebook_node(notebook)
    path.write_text(html, encoding="utf-8")
    return path


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("file", "data", "blob", "about") or parts.hostname in (
        "127.0.0.1",
        "localhost",
    )


def visible_text_offline(chromium: Any, page_file: Path) -> tuple[str, list[str]]:
    """The visible text of the page's cell outputs, with every non-local request refused;
    and the requests refused."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    refused: list[str] = []

    def route(route: Any) -> None:
        if is_local(route.request.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    try:
        context.route("**/*", route)
        page = context.new_page()
        page.goto(page_file.as_uri(), wait_until="load")
        page.wait_for_load_state("networkidle")
        # The outputs only: the cells' own source holds the scripted messages too.
        outputs = page.locator(".jp-OutputArea").all_inner_texts()
        return "\n".join(outputs), refused
    finally:
        context.close()


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_an_executed_and_exported_notebook_shows_the_conversation_offline(
    chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = tmp_path / "storage"
    monkeypatch.setenv("AWF_STORAGE", str(storage))
    notebook = execute(["%load_ext awf_nb", CONVERSATION], tmp_path)
    assert "widgets" in notebook.metadata  # the widget state is saved, as nbconvert does
    outputs = notebook.cells[1].outputs
    assert not [o for o in outputs if WIDGET_VIEW in o.get("data", {})], outputs

    text, refused = visible_text_offline(chromium, export_html(notebook, tmp_path / "nb.html"))

    (state_file,) = storage.glob("runs/*/state.json")
    turns = json.loads(state_file.read_text())["steps"]["plan"]["conversation"]["turns"]
    messages = [t["content"] for t in turns if t["role"] in ("user", "assistant")]
    assert len(messages) == 6
    shown = squeeze(text)
    for message in messages:
        assert squeeze(message) in shown, f"{message!r} is not on the page:\n{text}"
    assert "soil-ready" in shown and "planted" in shown and "completed" in shown
    assert refused, "nothing was refused: the page did not try the network, or the guard is off"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_the_committed_example_notebooks_read_offline(
    chromium: Any, tmp_path: Path, path: Path
) -> None:
    notebook = nbformat.read(path, as_version=4)
    transcripts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            assert WIDGET_VIEW not in data, f"{path.name}: an output keeps a widget view"
            html = data.get("text/html", "")
            if 'class="awf-panel"' in html or 'class="awf-eval-live"' in html:
                transcripts.append(data["text/plain"])
    runs = [c for c in notebook.cells if c.cell_type == "code" and RUN_CELL.search(c.source)]
    assert len(transcripts) >= len(runs), f"{path.name}: a run's output has no static copy"

    text, _ = visible_text_offline(chromium, export_html(notebook, tmp_path / "nb.html"))

    shown = squeeze(text)
    for transcript in transcripts:
        for line in transcript.splitlines():
            words = squeeze(line.split(": ", 1)[-1]).strip()
            assert words in shown, f"{path.name}: {words!r} is not on the exported page"


def test_the_conversation_example_executed_and_exported_shows_every_run_offline(
    chromium: Any, tmp_path: Path
) -> None:
    """notebooks/02-conversation.ipynb run top to bottom as `jupyter nbconvert --execute`
    runs it (in a copy of its folder: its cassettes are beside it), then exported: each of
    its four runs' transcripts is in the page's visible text."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for source in NOTEBOOKS.iterdir():
        if source.is_file():
            (folder / source.name).write_bytes(source.read_bytes())
    notebook = nbformat.read(folder / "02-conversation.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()

    transcripts = [
        output["data"]["text/plain"]
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if 'class="awf-panel"' in output.get("data", {}).get("text/html", "")
    ]
    runs = [c for c in notebook.cells if c.cell_type == "code" and RUN_CELL.search(c.source)]
    assert len(runs) == 4 and len(transcripts) == 4, transcripts

    text, _ = visible_text_offline(chromium, export_html(notebook, tmp_path / "nb.html"))

    shown = squeeze(text)
    for transcript in transcripts:
        lines = [squeeze(line.split(": ", 1)[-1]).strip() for line in transcript.splitlines()]
        missing = [words for words in lines if words not in shown]
        assert not missing, f"not on the exported page: {missing}"
