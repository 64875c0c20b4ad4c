"""Branch from here in a real JupyterLab, clicked in a real Chromium (Playwright): a run
paused at a breakpoint goes on, the person clicks "Branch from here" on one of their
messages, edits it, runs the branch, sees the branch's reply in its own panel below the
original, and the diff of the two runs from where they diverge.

Screenshots of the pause, the branch and the diff, in JupyterLab's light and dark themes,
go to the test's temporary folder; with AWF_REFRESH_DOC_IMAGES=1 they refresh
docs/img/debug-*.png (docs/debugging.md) instead, so a test run never changes a tracked file.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer
from tests.support.kernels import REPO_ROOT
from tests.support.notebook_page import CLICK_HOLD_MS, STEP_MS, NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

# The scripted provider with no replies says back the message it gets.
WORKFLOW = """
name: garden
states:
  initial: prep
  prep: {type: command, command: "echo a sunny balcony", on_success: talk}
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Plan a garden for {{.states.prep.Output}}"
    on_success: done
  done: {type: terminal}
"""


def shot(tmp_path: Path, name: str, theme: str) -> str:
    if os.environ.get("AWF_REFRESH_DOC_IMAGES", "") not in ("", "0"):
        path = REPO_ROOT / "docs" / "img" / f"debug-{name}-{theme}.png"
    else:
        path = tmp_path / f"debug-{name}-{theme}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


@pytest.mark.parametrize("theme", list(THEMES))
def test_branch_from_a_message_edit_it_and_see_the_reply_and_the_diff(
    page: Any, lab: JupyterLabServer, theme: str, tmp_path: Path
) -> None:
    lab.set_lab_setting("@jupyterlab/apputils-extension:themes", {"theme": THEMES[theme]})
    page.set_viewport_size({"width": 1100, "height": 1400})
    cell = "%%awf --out r --break-after prep\n" + textwrap.dedent(WORKFLOW).lstrip()
    notebook = NotebookPage(page, lab, f"branch-{theme}.ipynb", ["%load_ext awf_nb", cell])
    notebook.run_all_cells()

    pause = notebook.panel.locator(".awf-pause")
    pause.wait_for(timeout=STEP_MS)
    assert "paused after step prep" in pause.inner_text()
    notebook.panel.screenshot(path=shot(tmp_path, "pause", theme))
    notebook.click("Continue")

    notebook.wait_for_reply("Plan a garden for a sunny balcony")
    notebook.send("Tomatoes, please.")
    notebook.wait_for_reply("Tomatoes, please.")
    notebook.wait_until_ready_for_input()

    mine = notebook.panel.locator(".awf-user").filter(has_text="Tomatoes, please.").first
    mine.locator("button.awf-branch").click(delay=CLICK_HOLD_MS)
    editor = notebook.panel.locator(".awf-branch-editor")
    box = editor.locator("textarea")
    box.wait_for(timeout=STEP_MS)
    assert box.input_value() == "Tomatoes, please."
    assert "Branch from talk#3" in editor.inner_text()
    box.fill("Strawberries instead.")
    editor.get_by_role("button", name="Run branch", exact=True).click(delay=CLICK_HOLD_MS)

    branch = notebook.panel.locator(".awf-branches .awf-panel").first
    branch.locator(".awf-assistant").filter(has_text="Strawberries instead.").first.wait_for(
        timeout=STEP_MS
    )
    label = notebook.panel.locator(".awf-branch-label").first.inner_text()
    assert "from talk#3" in label
    branch.get_by_role("button", name="Send", exact=True).wait_for(timeout=STEP_MS)
    notebook.panel.screenshot(path=shot(tmp_path, "branch", theme))
    branch.get_by_role("button", name="End conversation", exact=True).click(delay=CLICK_HOLD_MS)

    diff = notebook.panel.locator(".awf-diff")
    diff.wait_for(timeout=STEP_MS)
    text = diff.inner_text()
    assert "diverge at talk#3" in text
    first = diff.locator(".awf-diff-first").inner_text()
    assert "user: Tomatoes, please." in first and "user: Strawberries instead." in first
    notebook.panel.locator(".awf-branches").screenshot(path=shot(tmp_path, "diff", theme))

    notebook.click("End conversation")  # the original's: the branch's controls are gone
    notebook.wait_for_kernel_idle()
    saved = notebook.notebook.locator(".awf-panel").first
    saved.locator(".awf-summary").first.wait_for(timeout=STEP_MS)
    assert "diverge at talk#3" in saved.inner_text()  # the saved copy keeps the branch
