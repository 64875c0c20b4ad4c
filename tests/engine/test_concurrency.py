"""Many runs sharing one storage directory at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from awf_nb.api import arun
from awf_nb.store import Store

pytestmark = pytest.mark.asyncio

WORKFLOW = """
name: concurrent
inputs: [{name: n, type: integer}]
states:
  initial: work
  work: {type: step, command: "echo run $n", on_success: ask}
  ask:
    type: agent
    provider: scripted
    prompt: "number {{.inputs.n}}"
    options: {delay_ms: 1}
    on_success: done
  done: {type: terminal}
"""


async def test_fifty_concurrent_runs_share_storage(tmp_path: Path):
    root = tmp_path / "shared"
    # one Store object per run, as separate processes or kernels would have
    results = await asyncio.gather(
        *(arun(WORKFLOW, {"n": n}, storage=Store(root), cwd=tmp_path) for n in range(50))
    )
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert len({r.run_id for r in results}) == 50
    history = Store(root).history(limit=100)
    assert len(history) == 50
    assert {h.status for h in history} == {"completed"}
    for result in results:
        saved = json.loads((root / "runs" / result.run_id / "state.json").read_text())
        n = saved["inputs"]["n"]
        assert saved["status"] == "completed"
        assert saved["steps"]["work"]["output"] == f"run {n}"
        assert saved["steps"]["ask"]["output"] == f"number {n}"
