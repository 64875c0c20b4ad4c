"""A person talks with an awf-nb workflow in Jupyter AI's chat panel, for real.

JupyterLab runs with Jupyter AI 3.2.0 and jupyter-ai-acp-client 0.3.3 (a venv of their
own, tests/support/jupyter_ai.py: that client pins the ACP SDK below 0.12) and the AWF
persona, whose `awf acp` runs from this environment (ACP SDK 0.12.1) on the project's
`workflows/chat.yaml`, its model a scripted OpenAI-compatible server on 127.0.0.1.
Chromium opens a chat, types `/chat topic="bread"`, then answers the workflow's question:
both of the workflow's replies must appear in the chat panel.

Screenshots of the chat (light and dark theme) go to the test's temporary folder; with
AWF_REFRESH_DOC_IMAGES=1 they refresh docs/img/jupyter-ai-chat-{light,dark}.png.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.jupyter_ai import PERSONA_ID, ensure_jupyter_ai_venv
from tests.support.jupyterlab import REPO_ROOT, JupyterLabServer
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

QUESTION = "What kind of bread would you like to bake?"
ANSWER = "Rye keeps longer; start with a sourdough starter."
# The first reply waits for JupyterLab to start the persona's `awf acp` and its session.
FIRST_REPLY_MS = 120_000
REPLY_MS = 60_000
# A step as the chat shows it (the class ends in -in_progress, -completed or -failed).
STEP = ".jp-jupyter-ai-acp-client-tool-call"
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}  # the default first


@dataclass
class ChatLab:
    lab: JupyterLabServer
    model: OpenAIServer
    storage: Path


@pytest.fixture(scope="module")
def chat_lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChatLab]:
    python = ensure_jupyter_ai_venv(request.config.cache.mkdir("awf-jupyter-ai-venvs"))
    root = tmp_path_factory.mktemp("chat-root")
    home = tmp_path_factory.mktemp("chat-home")
    (root / "workflows").mkdir()
    shutil.copy(REPO_ROOT / "workflows" / "chat.yaml", root / "workflows" / "chat.yaml")
    (root / "bread.chat").write_text("")  # an empty chat: Jupyter AI fills it in
    storage = home / "awf-storage"
    with OpenAIServer() as model:
        env = {
            "AWF_ACP_COMMAND": f"{sys.executable} -m awf_nb.cli acp --default chat",
            "AWF_MODEL": f"test-model@{model.base_url}",
            "AWF_STORAGE": str(storage),
        }
        config = {
            # AWF answers in the chat without being @-mentioned; no MCP servers offered
            # to it, and Jupyter AI's own MCP server on a free port (its default is fixed).
            "PersonaManager": {"default_persona_id": PERSONA_ID, "builtin_mcp_servers": []},
            "MCPExtensionApp": {"mcp_port": free_port()},
        }
        with JupyterLabServer(root, home, env=env, python=python, config=config) as lab:
            yield ChatLab(lab, model, storage)


def send(page: Any, text: str) -> None:
    box = page.get_by_placeholder("Type a chat message")
    box.click()
    box.fill(text)
    box.press("Enter")


def pick_theme(page: Any, name: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel").get_by_text(name, exact=True).click()
    light = "true" if "Light" in name else "false"
    page.locator(f"body[data-jp-theme-light='{light}']").wait_for(
        state="attached", timeout=REPLY_MS
    )
    page.get_by_text(ANSWER).wait_for(timeout=REPLY_MS)


def screenshot_path(tmp_path: Path, theme: str) -> Path:
    if os.environ.get("AWF_REFRESH_DOC_IMAGES", "") not in ("", "0"):
        return REPO_ROOT / "docs" / "img" / f"jupyter-ai-chat-{theme}.png"
    return tmp_path / f"jupyter-ai-chat-{theme}.png"


def test_a_person_chats_with_a_workflow_in_jupyter_ais_chat_panel(
    page: Any, chat_lab: ChatLab, tmp_path: Path
) -> None:
    chat_lab.model.script(Reply.text(QUESTION), Reply.text(ANSWER))
    page.goto(f"{chat_lab.lab.url}/lab/tree/bread.chat")

    send(page, '/chat topic="bread"')
    page.get_by_text(QUESTION).wait_for(timeout=FIRST_REPLY_MS)
    send(page, "Rye, mostly.")
    page.get_by_text(ANSWER).wait_for(timeout=REPLY_MS)

    # The workflow got the topic from the slash command, then the person's answer.
    first, second = chat_lab.model.requests
    assert "I need help with bread." in first.body["messages"][-1]["content"]
    assert second.body["messages"][-1] == {"role": "user", "content": "Rye, mostly."}
    assert [m["content"] for m in second.body["messages"] if m["role"] == "assistant"] == [QUESTION]
    # The chat is an awf run like any other (`awf status` lists it).
    assert len(list((chat_lab.storage / "runs").iterdir())) == 1
    # The conversation step is still running while the person types, never "failed".
    assert page.locator(f"{STEP}-failed").count() == 0
    assert page.locator(f"{STEP}-in_progress").count() == 1

    # Light is JupyterLab's default; dark is picked from the Settings menu, as a person
    # would (reloading the page would close the chat, and Jupyter AI stops its agents).
    for theme in THEMES:
        if theme == "dark":
            pick_theme(page, THEMES[theme])
        shot = screenshot_path(tmp_path, theme)
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot))

    # `exit` ends the conversation as at the terminal's `> ` prompt: the step is done.
    send(page, "exit")
    page.locator(f"{STEP}-completed").first.wait_for(timeout=REPLY_MS)
    assert page.locator(f"{STEP}-failed").count() == 0
    assert len(chat_lab.model.requests) == 2
