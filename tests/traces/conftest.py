"""Arize Phoenix, started once for the trace tests (tests/support/phoenix.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.phoenix import Phoenix, started


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with started(tmp_path_factory.mktemp("phoenix")) as server:
        yield server
