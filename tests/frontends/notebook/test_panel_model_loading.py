"""While the local model loads (seconds on a cold start), the panel's status line says so
instead of showing an empty reply (marker `real_model`: a real first load)."""

from __future__ import annotations

import pytest

from awf_nb.api import arun, load
from awf_nb.frontends.notebook.panel import RunPanel
from awf_nb.providers.local_process import shared_process

pytestmark = pytest.mark.real_model

ONE_TURN = """
name: loading
states:
  initial: ask
  ask:
    type: agent
    provider: local
    prompt: "Say hi."
    options: {max_tokens: 4, context_window: 1280}
    on_success: done
  done: {type: terminal}
"""


async def test_the_status_line_says_the_model_is_loading_until_it_is_ready() -> None:
    shared_process().close()  # a fresh model process, as a new kernel's first run has
    panel = RunPanel("loading")
    shown: list[str] = []
    panel.status.observe(lambda change: shown.append(change["new"]), names="value")
    result = await arun(load(ONE_TURN), sink=panel, storage=False)
    assert result.ok, result.error
    loading = [s for s in shown if "ask: loading model SmolLM2-135M-Instruct.Q4_1.gguf…" in s]
    assert loading, shown
    after = shown[shown.index(loading[-1]) + 1 :]
    assert after and "running ask" in after[0]  # back to the step once the model is ready
    assert "loading model" not in panel.status.value
