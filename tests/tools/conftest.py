"""Fixtures for the agent-tools tests: a working directory and tool sets built on it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from awf_nb.secrets import Masker
from awf_nb.tools import StepToolSet, build_toolset
from tests.support.mcp_peer import SECRET


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
