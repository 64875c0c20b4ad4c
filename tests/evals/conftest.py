"""Fixtures for the eval tests: `project`, a project folder (tests/support/eval_project.py)
that is also the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.eval_project import CHAT_WORKFLOW, Project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The project folder, also the working directory (paths in messages are relative)."""
    p = Project(tmp_path / "project")
    p.root.mkdir()
    monkeypatch.chdir(p.root)
    p.write("wf.yaml", CHAT_WORKFLOW)
    return p
