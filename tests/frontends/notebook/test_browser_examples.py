"""The example notebooks as a person runs them: JupyterLab's Run All, in Chromium.

01-quickstart runs to its last cell, past the cell that is meant to fail. 02-conversation
is a chat: Run All stops at its first conversation, the person types into the panel and
the bundled model answers; ending the conversations lets Run All finish the notebook.
(Headless runs of every example — nbval, nbconvert --execute — are test_magic_notebooks.py.)
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer
from tests.support.kernels import REPO_ROOT
from tests.support.notebook_page import KERNEL_IDLE_MS, STEP_MS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODEL_MS = 180_000  # the bundled model loads and answers on a shared CPU


def open_example(page: Any, lab: JupyterLabServer, name: str) -> Any:
    """The example notebook (with the files it reads next to it) open in JupyterLab."""
    for folder in ("notebooks", "workflows", "evals"):
        shutil.copytree(REPO_ROOT / folder, lab.root / folder, dirs_exist_ok=True)
    # Every cell in the page (JupyterLab otherwise draws only the cells in view).
    lab.set_lab_setting("@jupyterlab/notebook-extension:tracker", {"windowingMode": "none"})
    page.goto(lab.notebook_url(f"notebooks/{name}", workspace=name.removesuffix(".ipynb")))
    notebook = page.locator(".jp-NotebookPanel:visible")
    notebook.wait_for(timeout=KERNEL_IDLE_MS)
    idle = page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\|\s*Idle$"))
    idle.first.wait_for(timeout=KERNEL_IDLE_MS)
    return notebook


def menu(page: Any, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def run_all(page: Any, notebook: Any) -> None:
    """Edit → Clear Outputs of All Cells (the saved ones), then Run → Run All Cells."""
    menu(page, "Edit", "Clear Outputs of All Cells")
    prompts = notebook.locator(".jp-CodeCell .jp-InputPrompt")
    prompts.filter(has_text=re.compile(r"\[\d+\]")).first.wait_for(state="detached")
    menu(page, "Run", "Run All Cells")


def wait_until_run_to_the_end(notebook: Any, timeout: float) -> None:
    """Every code cell has run: the last one shows an execution number."""
    last = notebook.locator(".jp-CodeCell").last.locator(".jp-InputPrompt")
    last.filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=timeout)


def test_run_all_on_the_quickstart_goes_past_the_cell_meant_to_fail(
    page: Any, lab: JupyterLabServer
) -> None:
    notebook = open_example(page, lab, "01-quickstart.ipynb")
    run_all(page, notebook)
    wait_until_run_to_the_end(notebook, STEP_MS * 4)

    failing = notebook.locator(".jp-CodeCell").filter(has_text="name: broken")
    failing.locator(".jp-OutputArea-output").filter(
        has_text="workflow broken failed (see the run above)"
    ).first.wait_for(timeout=STEP_MS)
    last_output = notebook.locator(".jp-CodeCell").last.locator(".jp-OutputArea")
    assert "QUIET PLEASE" in last_output.inner_text()


@pytest.mark.real_model
def test_the_conversation_example_is_a_chat_with_the_bundled_model(
    page: Any, lab: JupyterLabServer
) -> None:
    notebook = open_example(page, lab, "02-conversation.ipynb")
    run_all(page, notebook)

    chat = notebook.locator(".awf-panel").first
    box = chat.locator(".awf-input textarea")
    send = chat.get_by_role("button", name="Send", exact=True)
    from playwright.sync_api import expect

    expect(send).to_be_enabled(timeout=MODEL_MS)  # the model loaded and answered
    first_reply = chat.locator(".awf-assistant .awf-stream").first.inner_text()
    assert first_reply.strip(), "the bundled model said nothing"
    box.fill("Basil, then. How often should I water it?")
    send.click()
    chat.locator(".awf-user").filter(has_text="How often should I water it?").first.wait_for(
        timeout=STEP_MS
    )
    expect(send).to_be_enabled(timeout=MODEL_MS)
    assert chat.locator(".awf-assistant .awf-stream").count() == 2
    chat.get_by_role("button", name="End conversation", exact=True).click()

    # The conversation step of the workflow asks next, in its own panel.
    garden = notebook.locator(".awf-panel").filter(has_text="balcony").first
    end = garden.get_by_role("button", name="End conversation", exact=True)
    expect(end).to_be_enabled(timeout=MODEL_MS)
    end.click()

    wait_until_run_to_the_end(notebook, MODEL_MS)
    last_output = notebook.locator(".jp-CodeCell").last.locator(".jp-OutputArea")
    assert "Just one pot." in last_output.inner_text()
