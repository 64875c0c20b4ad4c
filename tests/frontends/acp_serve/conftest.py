"""Workflows served by `awf acp` in these tests (the scripted provider as their model)."""

from __future__ import annotations

from pathlib import Path

import pytest

WORKFLOWS = {
    "echo": """
name: echo
description: Say back what you were given
inputs:
  - name: topic
    required: true
    description: what to say
states:
  initial: say
  say:
    type: agent
    provider: scripted
    prompt: "About {{.inputs.topic}}"
    on_success: done
  done:
    type: terminal
""",
    "chat": """
name: chat
description: Chat about a topic
inputs:
  - name: topic
    required: true
states:
  initial: talk
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let us talk about {{.inputs.topic}}"
    on_success: done
  done:
    type: terminal
""",
    "tooly": """
name: tooly
description: Writes a marker file when allowed
states:
  initial: work
  work:
    type: agent
    provider: scripted
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {file_path: marker.txt, content: written}}]
        - "first done"
    tools:
      builtin: [Write]
      confirm: [Write]
    prompt: "write"
    on_success: again
  again:
    type: agent
    provider: scripted
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {file_path: marker2.txt, content: written}}]
        - "second done"
    tools:
      builtin: [Write]
      confirm: [Write]
    prompt: "write again"
    on_success: done
  done:
    type: terminal
""",
    "slow": """
name: slow
description: Takes its time
states:
  initial: wait
  wait:
    type: command
    command: "echo started; sleep 60"
    on_success: done
  done:
    type: terminal
""",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "workflows"
    folder.mkdir()
    for name, text in WORKFLOWS.items():
        (folder / f"{name}.yaml").write_text(text)
    return tmp_path
