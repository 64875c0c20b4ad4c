"""What the docs say pass^1 is, checked against what the summary computes: it equals the
pass rate only when no row errored (an error counts as a trial that did not pass)."""

from __future__ import annotations

from pathlib import Path

from awf_nb.evals.results import EvalRow, EvalSummary

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_pass_hat_1_is_not_the_pass_rate_once_a_row_errors() -> None:
    rows = [EvalRow("a", 1, passed=True), EvalRow("a", 2, passed=None, error_kind="scorer")]
    summary = EvalSummary.of(rows, [], epochs=2)
    assert summary.pass_rate == 1.0  # the error is left out
    assert summary.pass_hat[1] == 0.5  # the error is a trial that did not pass
    text = (DOCS / "evaluations.md").read_text()
    assert "pass^1 is the plain pass rate" not in text
    assert "equals the pass rate only when no run errored" in text


def test_the_docs_agree_that_an_agent_step_s_timeout_covers_the_wait_at_the_prompt() -> None:
    # behaviour: tests/engine/test_conversation.py::test_the_step_timeout_bounds_the_wait_at_the_prompt
    syntax = (DOCS / "workflow-syntax.md").read_text()
    [row] = [line for line in syntax.splitlines() if line.startswith("| `timeout` | per agent")]
    assert "not the time you take to answer)" not in row
    assert "each wait for your next message at the `> ` prompt" in row
    conversations = (DOCS / "conversations.md").read_text()
    assert "per wait for your next message" in conversations
