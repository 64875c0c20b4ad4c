"""The "AWF" persona of Jupyter AI v3's chat: it runs `awf acp`, so a person chats with
their workflows in JupyterLab's chat panel (AWF picked in the chat input's persona menu,
then `/chat topic=bread`, or plain text for the default workflow).

Jupyter AI finds it through the `jupyter_ai.personas` entry point; its environment has
awf-nb without dependencies (`pip install --no-deps awf-nb`: Jupyter AI 3.2 and awf-nb
cannot share one, docs/acp.md). The command it starts is `$AWF_ACP_COMMAND` (split like
a shell line) when set, else `python -m awf_nb.cli acp --default chat` with this Python;
the workflows are those on the search path of the folder JupyterLab serves
(`workflows/`, `.awf/workflows/`).

What the person types reaches `awf acp` as typed: the ACP client's note on editing
notebooks, which it puts before a session's first message, is left out (it would turn
`/chat topic=bread` into plain text, and awf's workflows do not edit notebooks through
Jupyter's MCP tools). And a conversation step stays a running step while the person
types: the client marks every step still running when a new message is sent as failed
(a turn of a coding agent ends with its tool calls), so the persona's client leaves
them be (`AwfAcpClient`); the step shows as done when the conversation ends.
"""

from __future__ import annotations

import os
import shlex
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ClassVar

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyter_ai_persona_manager import PersonaDefaults

AVATAR = Path(__file__).with_name("awf-avatar.svg")


def acp_command(env: dict[str, str] | None = None) -> list[str]:
    """The command line of the `awf acp` the persona talks to."""
    given = (env if env is not None else os.environ).get("AWF_ACP_COMMAND", "").strip()
    if given:
        return shlex.split(given)
    return [sys.executable, "-m", "awf_nb.cli", "acp", "--default", "chat"]


# True in the task sending the person's message (tasks copy it; a cancel is another task).
_SENDING: ContextVar[bool] = ContextVar("awf_sending", default=False)


class AwfAcpClient(JaiAcpClient):
    """Jupyter AI's ACP client, keeping a conversation step's entry running across turns.

    Before it sends a message the client clears the previous turn's unfinished work
    (tool calls marked failed, permission requests refused), the way its own persona
    class for Kiro adjusts it. For awf a step still running then is a conversation
    waiting for exactly this message, and no permission request is open while it waits;
    a cancel (the stop button) still clears everything.
    """

    async def prompt_and_reply(self, *args: Any, **kwargs: Any) -> Any:
        token = _SENDING.set(True)
        try:
            return await super().prompt_and_reply(*args, **kwargs)
        finally:
            _SENDING.reset(token)

    def _cancel_pending_work(self, session_id: str) -> None:
        if _SENDING.get():
            return
        super()._cancel_pending_work(session_id)


class AwfAcpPersona(BaseAcpPersona):
    """AWF's workflows as a Jupyter AI persona (an ACP agent run as a subprocess)."""

    acp_client_class: ClassVar[type[JaiAcpClient]] = AwfAcpClient

    NOTEBOOK_EDITING_GUIDANCE: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=acp_command(), **kwargs)
        # The client prepends its guidance (plus a blank line) to the first message
        # unless it was sent already: nothing is prepended, so a slash command stays one.
        self._notebook_guidance_sent = True

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="AWF",
            description="Your AWF workflows: /NAME key=value runs one; plain text chats.",
            avatar_path=str(AVATAR),
            system_prompt="unused",
        )
