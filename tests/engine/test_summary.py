"""The one end-of-run summary: built from the state, sent with RunFinished, and rendered
the same way by the terminal, the notebook and `RunResult.summary()`."""

from __future__ import annotations

import io

import pytest

from awf_nb.engine import events as ev
from awf_nb.engine.state import RunState, StepState
from awf_nb.engine.summary import RunSummary, StepLine, format_duration
from awf_nb.frontends.notebook.summary import summary_html, summary_text
from awf_nb.frontends.terminal import TerminalSink
from tests.support.events import Collect

TWO_STEPS = """
name: two
states:
  initial: build
  build: {type: step, command: "echo built", on_success: ask}
  ask:
    type: agent
    provider: scripted
    prompt: "Say something"
    options: {replies: ["Something."]}
    on_success: done
  done: {type: terminal, message: "all done"}
"""


async def test_the_finished_event_carries_the_summary_of_the_final_state(run_yaml):
    sink = Collect()
    result = await run_yaml(TWO_STEPS, sink=sink)

    [finished] = sink.of(ev.RunFinished)
    summary = finished.summary
    assert summary == RunSummary.from_state(result.state)
    assert (summary.workflow, summary.status, summary.message) == ("two", "completed", "all done")
    assert [(s.name, s.status) for s in summary.steps] == [
        ("build", "completed"),
        ("ask", "completed"),
        ("done", "completed"),
    ]
    assert summary.tokens == result.tokens > 0
    assert finished.status == "completed" and finished.tokens == summary.tokens


async def test_every_frontend_renders_the_same_summary(run_yaml):
    sink = Collect()
    result = await run_yaml(TWO_STEPS, sink=sink)
    [finished] = sink.of(ev.RunFinished)
    summary = finished.summary

    assert result.summary() == summary.to_text()
    assert summary_text(summary) == summary.to_text("%awf resume")
    html = summary_html(summary)
    assert summary.figures() in html and "<table" in html and "build" in html

    err = io.StringIO()
    TerminalSink("streaming", out=io.StringIO(), err=err).emit(finished)
    assert f"✓ completed {summary.figures()}" in err.getvalue()


async def test_a_failed_run_says_how_to_continue_it_in_each_frontend(run_yaml):
    sink = Collect()
    result = await run_yaml(
        """
        name: broken
        states:
          initial: a
          a: {type: step, command: "exit 3", on_success: ok}
          ok: {type: terminal}
        """,
        sink=sink,
    )
    summary = sink.of(ev.RunFinished)[0].summary

    assert summary.status == "failed" and "exit code 3" in summary.error
    assert summary.figures().startswith("after ")
    assert f"continue it with awf resume {result.run_id}" in result.summary()
    assert f"continue it with %awf resume {result.run_id}" in summary_html(summary)


def test_a_step_run_again_is_listed_once() -> None:
    state = RunState(run_id="r1", workflow_name="w", status="completed")
    state.steps = {"check": StepState(name="check", status="completed")}
    state.executed = ["check", "check", "check"]

    summary = RunSummary.from_state(state)
    assert summary.steps == (StepLine("check", "completed", summary.steps[0].duration),)
    assert summary.to_text().count("check") == 1


def test_the_text_summary_holds_no_terminal_control_characters() -> None:
    """A workflow made in Python skips the loader's check of names, and a terminal message
    or an error may quote what a model or a command wrote."""
    state = RunState(run_id="r1", workflow_name="w\x1b[2J", status="failed")
    state.steps = {"s\x1b]0;x\x07": StepState(name="s\x1b]0;x\x07", status="failed")}
    state.executed = list(state.steps)
    state.error = "boom \x1b[31mred\u202e"
    text = RunSummary.from_state(state).to_text()
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "boom" in text and "⟨U+202E⟩" in text


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.421, "0.42 s"), (12.34, "12.3 s"), (125, "2 min 05 s"), (3720, "1 h 02 min")],
)
def test_durations(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown
