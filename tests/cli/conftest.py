"""Fixtures for the tests of the real `awf` command line (helpers: tests/support/cli.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from tests.support.cli import run_awf


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "storage"


@pytest.fixture
def awf(storage: Path, tmp_path: Path) -> Callable[..., CompletedProcess[str]]:
    """`awf("run", "wf.yaml", input="...")` -> CompletedProcess (text): `run_awf` in
    `tmp_path` (or `cwd=`), the runs kept in `storage`, no colours; `env=` adds variables."""

    def call(
        *args: str, cwd: Path = tmp_path, env: Mapping[str, str | None] | None = None, **kw: Any
    ) -> CompletedProcess[str]:
        env = {"AWF_STORAGE": str(storage), "NO_COLOR": "1", **(env or {})}
        return run_awf(*args, cwd=cwd, env=env, **kw)

    return call


# A two-reply conversation on the scripted provider, shared by the run and cassette tests.
CHAT = """
name: chat
inputs:
  - {name: topic, default: bread}
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "let us talk about {{.inputs.topic}}"
    options: {replies: ["first reply", "second reply"]}
    on_success: done
  done: {type: terminal, message: "talked {{.states.chat.Conversation.TotalTurns}} turns"}
"""


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.yaml"
    path.write_text(CHAT)
    return path
