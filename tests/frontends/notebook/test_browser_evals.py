"""The live eval table in a real JupyterLab (Chromium): rows appear as runs start and
finish, in the theme's colours; a click on a row shows its run's conversation; Stop
cancels the runs in flight."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT_MS = 60_000

WORKFLOW = """\
name: gated-chat
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f "gate-$AWF_EVAL_CASE" ]; do sleep 0.02; done'
    timeout: 300
    on_success: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "hello from {{.env.AWF_EVAL_CASE}}"
    options: {replies: ["a reply for you"]}
    on_success: done
  done: {type: terminal}
"""

EVAL = """\
%%awf eval --out res --concurrency 2
workflow: gated.yaml
dataset: cases.jsonl
scorers:
  - name: replied
    condition: 'transcript contains "a reply"'
"""


def test_the_live_table_fills_in_opens_a_run_and_stops(page: Any, lab: JupyterLabServer) -> None:
    (lab.root / "gated.yaml").write_text(WORKFLOW)
    (lab.root / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{i}"}) + "\n" for i in range(3))
    )
    write_notebook(lab.root / "eval.ipynb", ["%load_ext awf_nb", EVAL])
    page.goto(lab.notebook_url("eval.ipynb", workspace="eval"))
    notebook = page.locator(".jp-NotebookPanel:visible")
    notebook.wait_for(timeout=WAIT_MS)
    idle = page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\|\s*Idle$"))
    idle.first.wait_for(timeout=WAIT_MS)
    notebook.locator(".jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")

    table = notebook.locator(".awf-eval-live")
    running = table.locator("tr.awf-eval-running")
    running.nth(1).wait_for(timeout=WAIT_MS)  # two runs in flight before any finished
    assert table.locator("tr.awf-eval-pass").count() == 0

    (lab.root / "gate-c0").touch()
    passed = table.locator('tr.awf-eval-pass[data-key="c0/1"]')
    passed.wait_for(timeout=WAIT_MS)
    colours = page.evaluate(
        """(row) => [getComputedStyle(row).borderLeftColor,
                     getComputedStyle(document.createElement('div')).color,
                     (() => { const probe = document.createElement('div');
                              probe.style.color = 'var(--jp-success-color1)';
                              document.body.appendChild(probe);
                              const c = getComputedStyle(probe).color; probe.remove(); return c; })()]""",
        passed.element_handle(),
    )
    assert colours[0] == colours[2], colours  # the theme's own success colour
    progress = notebook.locator(".awf-eval-progress")
    assert "1/3 runs" in progress.inner_text()

    passed.click()
    detail = notebook.locator(".awf-eval-detail")
    detail.locator(".awf-assistant").filter(has_text="a reply for you").first.wait_for(
        timeout=WAIT_MS
    )
    assert "hello from c0" in detail.inner_text()

    notebook.get_by_role("button", name="Stop").click()
    table.locator("tr.awf-eval-cancelled").nth(1).wait_for(timeout=WAIT_MS)
    assert table.locator("tr.awf-eval-running").count() == 0
    progress.filter(has_text="cancelled — finish it with").wait_for(timeout=WAIT_MS)
