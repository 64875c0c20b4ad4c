"""A bug in awf-nb (an exception that is not an `AwfError`) escaping a step ends the run as
`failed` with an "internal error" message — saved so, never left "running" (which `awf
list` shows as interrupted) — and the CLI adds how to see the traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from awf_nb import providers
from awf_nb.cli import main
from awf_nb.engine.ports import TextDelta, TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from awf_nb.store import Store
from tests.support.events import with_providers

WORKFLOW = """
name: buggy
states:
  initial: ask
  ask: {type: agent, provider: boom, prompt: go, on_success: done}
  done: {type: terminal}
"""


class Boom(ScriptedProvider):
    """A provider with a bug: it fails with something no provider should raise."""

    async def stream(self, turn: TurnRequest):  # type: ignore[override]
        yield TextDelta("partial")
        raise ValueError("a bug")


async def test_an_unexpected_exception_fails_the_run_and_its_step(run_yaml, store: Store) -> None:
    with pytest.raises(ValueError, match="a bug"):
        await run_yaml(WORKFLOW, providers=with_providers(boom=Boom))
    [run_id] = store.list_run_ids()
    state = store.load_state(run_id)
    assert (state.status, state.exit_code, state.completion_reason) == ("failed", 4, "step_failed")
    assert state.error == "internal error: ValueError: a bug"
    assert state.completed_at is not None
    assert state.steps["ask"].status == "failed"
    assert state.steps["ask"].error == "internal error: ValueError: a bug"


def test_the_cli_says_internal_error_with_the_debug_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(providers._PROVIDERS, "boom", Boom)
    source = tmp_path / "wf.yaml"
    source.write_text(textwrap.dedent(WORKFLOW))
    code = main(["run", str(source), "--storage", str(tmp_path / "runs")])
    assert code == 4
    err = capsys.readouterr().err
    assert "internal error: ValueError: a bug" in err
    assert "rerun with --debug to see the traceback" in err
    store = Store(tmp_path / "runs")
    [run_id] = store.list_run_ids()
    assert store.load_state(run_id).status == "failed"
