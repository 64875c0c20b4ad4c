"""The "AWF" persona of Jupyter AI v3's chat: it runs `awf acp`, so a person chats with
their workflows in JupyterLab's chat panel (`@AWF /chat topic=bread`, or plain text for
the default workflow).

Installed with the `jupyter-ai` extra; Jupyter AI finds it through the `jupyter_ai.personas`
entry point. The command it starts is `$AWF_ACP_COMMAND` (split like a shell line) when set,
else `python -m awf_nb.cli acp --default chat` with this Python; the workflows are those
on the search path of the folder JupyterLab serves (`workflows/`, `.awf/workflows/`).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults


def acp_command(env: dict[str, str] | None = None) -> list[str]:
    """The command line of the `awf acp` the persona talks to."""
    given = (env if env is not None else os.environ).get("AWF_ACP_COMMAND", "").strip()
    if given:
        return shlex.split(given)
    return [sys.executable, "-m", "awf_nb.cli", "acp", "--default", "chat"]


class AwfAcpPersona(BaseAcpPersona):  # type: ignore[misc]
    """AWF's workflows as a Jupyter AI persona (an ACP agent run as a subprocess)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=acp_command(), **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="AWF",
            description="Your AWF workflows: /NAME key=value runs one; plain text chats.",
            avatar_path="",
            system_prompt="unused",
        )
