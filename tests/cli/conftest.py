"""Helpers to run the real `awf` command line in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "storage"


@pytest.fixture
def awf(storage: Path, tmp_path: Path):
    """`awf("run", "wf.yaml", input="...")` -> CompletedProcess (text)."""

    def call(
        *args: str, input: str | None = "", timeout: float = 60, **kw
    ) -> subprocess.CompletedProcess:
        env = {**os.environ, "AWF_STORAGE": str(storage), "NO_COLOR": "1"}
        env.update(kw.pop("env", {}))
        return subprocess.run(
            [sys.executable, "-m", "awf_nb.cli", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=kw.pop("cwd", tmp_path),
            env=env,
            **kw,
        )

    return call


def spawn_awf(*args: str, storage: Path, cwd: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "AWF_STORAGE": str(storage), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "awf_nb.cli", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        start_new_session=True,
        **kw,
    )


def only_run_id(storage: Path) -> str:
    runs = sorted(p.name for p in (storage / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


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
