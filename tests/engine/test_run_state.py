"""How a run's state shows itself when printed (a notebook cell, a log line, a debugger)."""

from __future__ import annotations

from awf_nb.engine.state import ConversationState, RunState, StepState, Turn


def _long_run() -> RunState:
    turns = [Turn(role="user", content="tell me more " * 50) for _ in range(400)]
    return RunState(
        run_id="20261123-101500-000001",
        workflow_name="chat",
        status="completed",
        current_step="done",
        steps={"talk": StepState(name="talk", conversation=ConversationState(turns=turns))},
    )


def test_a_run_state_prints_as_one_short_line_however_long_its_conversations() -> None:
    shown = repr(_long_run())
    assert shown == (
        "RunState(run_id='20261123-101500-000001', workflow_name='chat', "
        "status='completed', current_step='done')"
    )


def test_a_failed_run_state_shows_its_error() -> None:
    state = _long_run().model_copy(update={"status": "failed", "error": "boom"})
    assert repr(state).endswith("status='failed', current_step='done', error='boom')")
