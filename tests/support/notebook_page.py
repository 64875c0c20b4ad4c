"""A notebook opened in JupyterLab by Playwright, and the run panel in it: what the browser
tests of the panel do as a person would (run cells with Shift+Enter, type, click, read)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.jupyterlab import JupyterLabServer, write_notebook

KERNEL_IDLE_MS = 60_000
# A person's click: ~0.1 s between mouse down and up. Playwright's default (no pause)
# would hide a panel that re-renders its buttons while the mouse is down.
CLICK_HOLD_MS = 120
STEP_MS = 30_000


class NotebookPage:
    """A notebook opened in JupyterLab and the run panel in it."""

    def __init__(self, page: Any, lab: JupyterLabServer, name: str, cells: list[str]) -> None:
        self.page = page
        write_notebook(lab.root / name, cells)
        self.cell_count = len(cells)
        page.goto(lab.notebook_url(name, workspace=name.removesuffix(".ipynb")))
        self.notebook = page.locator(".jp-NotebookPanel:visible")
        self.notebook.wait_for(timeout=KERNEL_IDLE_MS)
        self.wait_for_kernel_idle()

    def wait_for_kernel_idle(self) -> None:
        """The status bar reads 'Python 3 (ipykernel) | Idle'."""
        idle = self.page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\|\s*Idle$"))
        idle.first.wait_for(timeout=KERNEL_IDLE_MS)

    def run_all_cells(self) -> None:
        """Shift+Enter on every cell, starting in the first one's editor."""
        self.notebook.locator(".jp-Cell .cm-content").first.click()
        for _ in range(self.cell_count):
            self.page.keyboard.press("Shift+Enter")

    def comm_subshells(self) -> set[str]:
        """The kernel subshells the page sent comm messages through (none: the main shell)."""
        return {
            found
            for frame in self.page.kernel_frames.sent_comm_messages()
            for found in re.findall(r'"subshell_id"\s*:\s*"([^"]+)"', frame)
        }

    @property
    def panel(self) -> Any:
        return self.notebook.locator(".awf-panel").first

    @property
    def textarea(self) -> Any:
        return self.panel.locator(".awf-input textarea")

    def button(self, name: str) -> Any:
        return self.panel.get_by_role("button", name=name, exact=True)

    def assistant_bubbles(self) -> Any:
        return self.panel.locator(".awf-assistant .awf-stream")

    def user_bubbles(self) -> Any:
        return self.panel.locator(".awf-user .widget-html-content")

    def wait_for_reply(self, text: str) -> Any:
        bubble = self.assistant_bubbles().filter(has_text=text)
        bubble.first.wait_for(timeout=STEP_MS)
        return bubble.first

    def wait_until_ready_for_input(self) -> None:
        """The run waits for the person: Send is enabled and the box can be typed into."""
        from playwright.sync_api import expect

        expect(self.button("Send")).to_be_enabled(timeout=STEP_MS)
        expect(self.textarea).to_be_editable(timeout=STEP_MS)

    def click(self, button: str) -> None:
        self.button(button).click(delay=CLICK_HOLD_MS)

    def send(self, message: str) -> None:
        self.wait_until_ready_for_input()
        self.textarea.fill(message)
        self.click("Send")
        self.user_bubbles().filter(has_text=message).first.wait_for(timeout=STEP_MS)

    def wait_for_status(self, word: str) -> None:
        self.panel.locator(".awf-status").filter(has_text=word).first.wait_for(timeout=STEP_MS)
