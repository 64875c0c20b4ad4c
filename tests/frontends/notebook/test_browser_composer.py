"""The panel's text box in a real JupyterLab and Chromium, as a person uses a chat box:
Enter sends, Shift+Enter starts a new line (and never runs the cell), Enter in an empty box
sends nothing, and Send with an empty box ends the conversation."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.support.jupyterlab import JupyterLabServer
from tests.support.notebook_page import STEP_MS, NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHAT = """
name: keys
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Say hello."
    options:
      replies: ["Hello!", "Two lines received.", "unused"]
    on_success: done
  done: {type: terminal}
"""


def test_enter_sends_shift_enter_adds_a_line_and_an_empty_send_ends(
    page: Any, lab: JupyterLabServer
) -> None:
    from playwright.sync_api import expect

    cells = ["%load_ext awf_nb", "%%awf --out chat\n" + textwrap.dedent(CHAT).lstrip()]
    notebook = NotebookPage(page, lab, "keys.ipynb", cells)
    notebook.run_all_cells()
    notebook.wait_for_reply("Hello!")
    notebook.wait_until_ready_for_input()
    box = notebook.textarea
    cells_before = notebook.notebook.locator(".jp-Cell").count()

    # Enter in an empty box: nothing is sent, and the box keeps the focus.
    box.click()
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)  # what a message would show by now (none must come)
    assert notebook.user_bubbles().count() == 1  # the step's prompt only
    expect(notebook.button("Send")).to_be_enabled()

    # Shift+Enter adds a line (and runs no cell); Enter sends both lines at once.
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert box.input_value() == "first line\nsecond line"
    # JupyterLab's Shift+Enter (run the cell, then add one below the last) did not fire.
    assert notebook.notebook.locator(".jp-Cell").count() == cells_before
    page.keyboard.press("Enter")
    sent = notebook.user_bubbles().filter(has_text="second line")
    sent.first.wait_for(timeout=STEP_MS)
    assert sent.first.inner_text().strip() == "first line\nsecond line"
    assert box.input_value() == ""  # emptied at once, ready for the next message
    notebook.wait_for_reply("Two lines received.")

    # Send with an empty box ends the conversation: the step succeeds with the last reply.
    notebook.wait_until_ready_for_input()
    notebook.click("Send")
    notebook.wait_for_status("completed")
    notebook.wait_for_kernel_idle()
    assert [u.strip() for u in notebook.user_bubbles().all_inner_texts()] == [
        "Say hello.",
        "first line\nsecond line",
    ]


BREAK = """
name: paused
states:
  initial: make
  make: {type: command, command: "echo made", on_success: done}
  done: {type: terminal}
"""


def test_a_pause_takes_what_was_typed_into_its_text_area(page: Any, lab: JupyterLabServer) -> None:
    """Every key typed reaches the run with the click on Edit (the text is sent with it)."""
    cells = [
        "%load_ext awf_nb",
        "%%awf --out r --break-after make\n" + textwrap.dedent(BREAK).lstrip(),
        "print('MAKE=' + r.result().outputs['make'])",
    ]
    notebook = NotebookPage(page, lab, "pause.ipynb", cells)
    notebook.run_all_cells()
    info = notebook.panel.locator(".awf-pause-info").filter(has_text="paused after step make")
    info.first.wait_for(timeout=STEP_MS)
    box = notebook.panel.locator(".awf-pause-value textarea")
    assert box.input_value() == "made"

    box.fill("")
    box.press_sequentially("typed, key by key")
    notebook.click("Edit")
    notebook.panel.locator(".awf-pause-info").filter(has_text="typed, key by key").first.wait_for(
        timeout=STEP_MS
    )
    notebook.click("Continue")
    notebook.wait_for_status("completed")
    output = notebook.notebook.locator(".jp-OutputArea-output").filter(has_text="MAKE=")
    output.first.wait_for(timeout=STEP_MS)
    assert output.first.inner_text().strip() == "MAKE=typed, key by key"
