"""The run panel as a person uses it, in a real JupyterLab driven by Chromium: where the
focus goes, what stays in view, what the clock does, what the buttons at the prompt mean.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.jupyterlab import JupyterLabServer
from tests.support.notebook_page import STEP_MS, NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_REPLY = "\\n".join(f"- line {n:02d} of a long answer" for n in range(1, 81)) + "\\nEND."
CHAT = f"""
name: long-answers
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Ask me anything."
    options:
      delay_ms: 5
      replies: ["What would you like to know?", "{LONG_REPLY}", "Anything else?"]
    on_success: done
  done: {{type: terminal}}
"""

SLOW_REPLY = " ".join(f"word{n:02d}" for n in range(1, 60)) + " END-OF-SLOW-REPLY"
SLOW = f"""
name: slow-writer
states:
  initial: write
  write:
    type: agent
    provider: scripted
    prompt: "Write slowly."
    options:
      delay_ms: 200
      replies: ["{SLOW_REPLY}"]
    on_success: done
  done: {{type: terminal}}
"""


def cell(workflow: str, flags: str = "--out chat") -> str:
    return f"%%awf {flags}\n" + textwrap.dedent(workflow).lstrip()


def focused_in_panel_box(page: Any) -> bool:
    return bool(
        page.evaluate(
            "() => { const a = document.activeElement;"
            " return !!a && a.tagName === 'TEXTAREA' && !!a.closest('.awf-panel .awf-input'); }"
        )
    )


def box_in_view(page: Any, notebook: NotebookPage) -> bool:
    """The text box is inside the visible part of the notebook's scrolling area."""
    return bool(
        notebook.textarea.evaluate(
            "box => { let area = box.parentElement;"
            " while (area && !(/(auto|scroll)/.test(getComputedStyle(area).overflowY)"
            "   && area.scrollHeight > area.clientHeight)) area = area.parentElement;"
            " const seen = (area || document.documentElement).getBoundingClientRect();"
            " const r = box.getBoundingClientRect();"
            " return r.top >= seen.top && r.bottom <= Math.min(seen.bottom, innerHeight); }"
        )
    )


def test_shift_enter_puts_the_focus_in_the_chat_box_and_a_long_reply_keeps_it_in_view(
    page: Any, lab: JupyterLabServer
) -> None:
    notebook = NotebookPage(page, lab, "focus.ipynb", ["%load_ext awf_nb", cell(CHAT)])
    notebook.run_all_cells()  # Shift+Enter on each cell: the last one makes a new cell
    notebook.wait_for_reply("What would you like to know?")
    notebook.wait_until_ready_for_input()

    page.wait_for_function(
        "() => document.activeElement && document.activeElement.tagName === 'TEXTAREA'",
        timeout=STEP_MS,
    )
    assert focused_in_panel_box(page)
    assert box_in_view(page, notebook)

    page.keyboard.type("Tell me everything.")
    page.keyboard.press("Enter")  # sends; the 80-line reply streams in above the box
    notebook.wait_for_reply("END.")
    notebook.wait_until_ready_for_input()
    assert box_in_view(page, notebook), "the long reply pushed the text box out of view"
    assert focused_in_panel_box(page)

    notebook.click("End conversation")
    notebook.wait_for_status("completed")


def test_the_elapsed_time_ticks_while_a_reply_streams(page: Any, lab: JupyterLabServer) -> None:
    """The clock moves on every second while the kernel streams, with no message for it:
    it advances at least twice before the reply ends (it stood still while text came)."""
    notebook = NotebookPage(page, lab, "clock.ipynb", ["%load_ext awf_nb", cell(SLOW)])
    notebook.run_all_cells()
    notebook.wait_for_reply("word01")
    page.evaluate(
        "() => { window.__awfTicks = [];"
        " const status = document.querySelector('.awf-panel .awf-status');"
        " const reply = () => document.querySelector('.awf-panel .awf-assistant');"
        " const note = () => { const clock = status.innerText.match(/(\\d+) s\\b/);"
        "   const done = reply().innerText.includes('END-OF-SLOW-REPLY');"
        "   if (clock && !done) window.__awfTicks.push(clock[1]); };"
        " new MutationObserver(note).observe(status,"
        "   { subtree: true, childList: true, characterData: true }); note(); }"
    )
    page.wait_for_function(
        "() => new Set(window.__awfTicks).size >= 3 || document.querySelector("
        "'.awf-panel .awf-assistant').innerText.includes('END-OF-SLOW-REPLY')",
        timeout=STEP_MS,
    )
    ticks = page.evaluate("() => window.__awfTicks")
    assert len(set(ticks)) >= 3, f"the clock showed only {sorted(set(ticks))} while streaming"
    notebook.wait_for_status("completed")


def test_at_the_prompt_end_conversation_and_cancel_run_are_two_controls(
    page: Any, lab: JupyterLabServer
) -> None:
    notebook = NotebookPage(page, lab, "controls.ipynb", ["%load_ext awf_nb", cell(CHAT)])
    notebook.run_all_cells()
    notebook.wait_until_ready_for_input()

    # Nothing is being written: Stop (the reply) is off; ending and cancelling are apart.
    expect(notebook.button("Stop")).to_be_disabled()
    expect(notebook.button("End conversation")).to_be_enabled()
    expect(notebook.button("Cancel run")).to_be_enabled()
    assert "cancel" in (notebook.button("Cancel run").get_attribute("title") or "").lower()
    notebook.click("Cancel run")
    notebook.wait_for_status("cancelled")
    notebook.panel.get_by_text("%awf resume").first.wait_for(timeout=STEP_MS)
