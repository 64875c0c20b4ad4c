"""Fixtures for the CLI provider tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import FakeCli


@pytest.fixture
def fake_cli(tmp_path: Path) -> FakeCli:
    """An empty fake-CLI setup: install binaries and write a plan in each test."""
    folder = tmp_path / "fake"
    bin_dir = tmp_path / "bin"
    workdir = tmp_path / "work"
    for path in (folder, bin_dir, workdir):
        path.mkdir()
    return FakeCli(folder, bin_dir, workdir)
