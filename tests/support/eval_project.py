"""A project folder for the eval tests: a workflow, datasets and eval files written into it,
and its run store (the `project` fixture of tests/evals/conftest.py makes one)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from awf_nb.store import Store

# A conversation with the person (or whoever plays them): the scripted agent answers with
# its replies in turn; the terminal step says how it went.
CHAT_WORKFLOW = """\
name: chatty
inputs:
  - name: topic
    required: true
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let us talk about {{.inputs.topic}}"
    options:
      replies: ["first answer about {{.inputs.topic}}", "second answer", "third answer", "fourth answer"]
    on_success: done
  done:
    type: terminal
    message: "turns: {{.states.chat.Conversation.TotalTurns}}"
"""


class Project:
    """A folder holding an eval: `write_eval(yaml)` returns the eval file's path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = Store(root / "storage")

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def rows(self, name: str, rows: list[dict[str, Any]]) -> Path:
        path = self.root / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def write_eval(self, text: str, name: str = "t.eval.yaml") -> Path:
        self.write(name, text)
        return Path(name)
