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


# A conversation with an agent on an OpenAI-compatible server (`SERVER` in the environment).
SERVED_WORKFLOW = """\
name: served
inputs: [{name: topic, required: true}]
states:
  initial: chat
  chat:
    type: agent
    provider: openai_compatible
    mode: conversation
    prompt: "Help me with {{.inputs.topic}}"
    options: {base_url: "{{.env.SERVER}}", model: m, api_key: sk-test-secret-123456}
    on_success: done
  done: {type: terminal}
"""


def served_eval_text(url: str, judge_url: str | None = None, max_turns: int = 2) -> str:
    """An eval of `wf2.yaml` (SERVED_WORKFLOW) over `cases.jsonl`: a simulated user and a
    judge on the server at `url` (the judge at `judge_url` if given), two epochs."""
    judge_url = judge_url or url
    return f"""\
workflow: wf2.yaml
dataset: cases.jsonl
inputs: {{topic: "{{{{.case.topic}}}}"}}
user:
  provider: openai_compatible
  options: {{base_url: "{url}", model: m}}
  persona: "You want {{{{.case.topic}}}}"
  max_turns: {max_turns}
scorers:
  - name: stars
    judge:
      provider: openai_compatible
      options: {{base_url: "{judge_url}", model: m}}
      prompt: "How many stars? {{{{.transcript}}}}"
      pass: ">= 3"
  - name: long
    condition: 'turns >= 2'
epochs: 2
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
