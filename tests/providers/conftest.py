"""Fixtures for the provider tests.

- `provider`: an OpenAI-compatible provider, closed after the test.
- `no_openai_environment`: no OPENAI_BASE_URL / OPENAI_MODEL / OPENAI_API_KEY from the
  developer's shell, so a test sees only the options it gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from awf_nb.providers.openai_compatible import OpenAICompatibleProvider


@pytest.fixture
async def provider() -> AsyncIterator[OpenAICompatibleProvider]:
    instance = OpenAICompatibleProvider()
    yield instance
    await instance.aclose()


@pytest.fixture
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
