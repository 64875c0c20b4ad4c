"""Fixtures for the agent-tools tests: a working directory and tool sets built on it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from awf_nb.secrets import Masker
from awf_nb.tools import StepToolSet, build_toolset

TEST_SERVER = Path(__file__).with_name("mcp_test_server.py")
SECRET = "sk-test-0123456789"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The step's working directory (with a sibling folder `outside` next to it)."""
    folder = tmp_path / "work"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside data\n")
    return folder


@pytest.fixture
def masker() -> Masker:
    return Masker([SECRET])


@pytest.fixture
def toolset(work: Path, masker: Masker) -> Callable[..., StepToolSet]:
    """`toolset(builtin=[...], commands=[...], mcp=[...], env={...})` on `work`."""

    def make(env: dict[str, str] | None = None, **config: Any) -> StepToolSet:
        return build_toolset(config, cwd=work, env={**os.environ, **(env or {})}, masker=masker)

    return make


def notes_server(name: str = "notes", *args: str, **fields: Any) -> dict[str, Any]:
    """An `mcp:` entry running tests/tools/mcp_test_server.py."""
    return {"name": name, "command": sys.executable, "args": [str(TEST_SERVER), *args], **fields}


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")
