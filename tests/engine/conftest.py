"""Helpers for engine tests: run inline YAML with the scripted provider and a real shell."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.api import RunResult, arun
from awf_nb.store import Store
from tests.support.events import Collect

__all__ = ["Collect"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def run_yaml(store: Store, workdir: Path):
    """`await run_yaml(yaml, inputs=..., replies=..., sink=...)` -> RunResult."""

    async def runner(text: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> RunResult:
        source = workdir / "wf.yaml"
        source.write_text(textwrap.dedent(text))
        kwargs.setdefault("storage", store)
        kwargs.setdefault("cwd", workdir)
        return await arun(source, inputs, **kwargs)

    return runner
