"""pass^k as τ-bench defines it, and the summary's counts."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from awf_nb.evals.results import EvalRow, EvalSummary, pass_hat_k
from awf_nb.evals.scorers import ScoreValue


def test_known_values() -> None:
    # case a: 3 of 3 passed, case b: 1 of 3, case c: 0 of 3
    trials = {"a": [True, True, True], "b": [True, False, False], "c": [False, False, False]}
    assert pass_hat_k(trials, 1) == (1 + 1 / 3 + 0) / 3
    assert pass_hat_k(trials, 2) == (1 + 0 + 0) / 3  # C(1,2) = 0
    assert pass_hat_k(trials, 3) == 1 / 3
    assert pass_hat_k({"a": [True, False]}, 3) is None  # no case has 3 trials


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=8))
def test_pass_hat_k_never_grows_with_k_and_starts_at_the_pass_rate(runs: list[list[bool]]) -> None:
    trials = {str(i): r for i, r in enumerate(runs)}
    n = min(len(r) for r in runs)
    values = [pass_hat_k({c: r[:n] for c, r in trials.items()}, k) for k in range(1, n + 1)]
    assert math.isclose(values[0], sum(sum(r[:n]) / n for r in runs) / len(runs))
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))


def test_summary_counts_errors_apart_and_as_not_passing_in_pass_k() -> None:
    def row(case: str, epoch: int, passed: bool | None, score: float | None = None) -> EvalRow:
        value = ScoreValue(passed, score, error="" if passed is not None else "boom")
        return EvalRow(
            case,
            epoch,
            tokens=10,
            seconds=1.0,
            scores={"j": value},
            passed=passed,
            error_kind="" if passed is not None else "scorer",
        )

    rows = [row("a", 1, True, 5), row("a", 2, None), row("b", 1, False, 1), row("b", 2, False, 2)]
    summary = EvalSummary.of(rows, [("j", "judge")], epochs=2)
    assert (summary.passed, summary.failed, summary.errors) == (1, 2, 1)
    assert summary.pass_rate == 1 / 3  # errors are not in the pass rate...
    assert summary.pass_hat == {1: 0.25, 2: 0.0}  # ...but are trials that did not pass
    j = summary.scorers["j"]
    assert (j.passed, j.failed, j.errors, j.mean_score) == (1, 2, 1, 8 / 3)
    assert summary.errors_by_kind == {"scorer": 1}
    assert summary.tokens == 40 and summary.seconds == 4.0
    assert "pass^2" in summary.to_text()
