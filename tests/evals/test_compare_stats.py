"""The statistics of `awf eval-show A --vs B` and of variants, against known results."""

from __future__ import annotations

import math

import pytest

from awf_nb.evals import stats
from awf_nb.evals.compare import compare_rows
from awf_nb.evals.results import EvalRow
from awf_nb.evals.scorers import ScoreValue


def test_mcnemar_exact_is_the_textbook_binomial() -> None:
    # 0 discordant pairs one way, 7 the other: 2 * 0.5**7
    assert stats.mcnemar_exact(0, 7) == pytest.approx(2 * 0.5**7) == pytest.approx(0.015625)
    # a textbook table: b=1, c=8 -> 2 * (C(9,0)+C(9,1)) / 2**9 = 0.0390625
    assert stats.mcnemar_exact(1, 8) == pytest.approx(20 / 512)
    assert stats.mcnemar_exact(5, 5) == 1.0
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(3, 10) == pytest.approx(
        2 * sum(math.comb(13, i) for i in range(4)) / 2**13
    )


def test_mcnemar_agrees_with_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for b, c in [(0, 7), (1, 8), (2, 3), (4, 15), (12, 30)]:
        expected = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(expected)


def test_holm_step_down() -> None:
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.015625] * 3) == pytest.approx([0.046875] * 3)
    assert stats.holm([0.5, None, 0.01]) == [pytest.approx(0.5), None, pytest.approx(0.02)]


def test_bootstrap_recovers_a_known_mean_difference_and_is_deterministic() -> None:
    import random

    rng = random.Random(7)
    diffs = [1.0 + rng.gauss(0, 0.5) for _ in range(400)]
    boot = stats.paired_bootstrap(diffs, seed=3)
    assert boot.low < 1.0 < boot.high  # the true difference is inside
    assert boot.high - boot.low < 0.2  # 400 cases: about ±1.96 * 0.5/20
    assert not boot.covers_zero
    assert stats.paired_bootstrap(diffs, seed=3) == boot


def _rows(passes: list[bool], prefix: str, *, score: list[float] | None = None) -> list[EvalRow]:
    rows = []
    for i, ok in enumerate(passes):
        scores = {"ok": ScoreValue(ok)}
        if score is not None:
            scores["stars"] = ScoreValue(score[i] >= 3, score=score[i])
        rows.append(EvalRow(f"c{i:02}", 1, run_id=f"{prefix}-{i}", scores=scores, passed=ok))
    return rows


def test_b_better_on_exactly_7_of_20_cases() -> None:
    a = [False] * 7 + [True] * 8 + [False] * 5
    b = [True] * 15 + [False] * 5
    found = compare_rows(_rows(a, "a"), _rows(b, "b"), ["ok"], a="base", b="new")
    ok = found["ok"]
    assert (ok.better, ok.worse, ok.cases) == (7, 0, 20)
    assert ok.p_value == pytest.approx(0.015625)
    assert ok.difference == pytest.approx(7 / 20)
    assert 0 < ok.low < 0.35 < ok.high <= 0.7
    assert ok.verdict == "better"
    # two comparisons (ok and passed), same p: Holm gives both 2p
    assert found.comparisons == 2
    assert ok.p_adjusted == pytest.approx(0.03125)
    assert [f.case for f in found.flips] == [f"c{i:02}" for i in range(7)]
    assert found.flips[0].a_runs == ("a-0",) and found.flips[0].b_runs == ("b-0",)
    text = found.to_text()
    assert "better" in text and "+ c00: base runs a-0 | new runs b-0" in text


def test_holm_over_several_scorers_can_undo_a_verdict() -> None:
    # 6 of 20 better on `ok` alone: p = 2 * 0.5**6 = 0.03125 < 0.05 unadjusted,
    # but with a second scorer with the same verdicts and `passed`, Holm gives 3p.
    a = [False] * 6 + [True] * 14
    b = [True] * 20
    found = compare_rows(_rows(a, "a"), _rows(b, "b"), ["ok"])
    assert found["ok"].p_value == pytest.approx(0.03125)
    assert found["ok"].p_adjusted == pytest.approx(0.0625)
    assert found["ok"].verdict == "no clear difference"


def test_numeric_scorer_compares_mean_scores() -> None:
    a_scores = [2.0] * 20
    b_scores = [3.0] * 10 + [2.0] * 10
    found = compare_rows(
        _rows([True] * 20, "a", score=a_scores), _rows([True] * 20, "b", score=b_scores),
        ["ok", "stars"],
    )  # fmt: skip
    stars = found["stars"]
    assert stars.metric == "mean score"
    assert stars.difference == pytest.approx(0.5)
    assert stars.verdict == "better"


def test_a_handful_of_cases_gets_no_verdict() -> None:
    found = compare_rows(_rows([False] * 3, "a"), _rows([True] * 3, "b"), ["ok"])
    assert found["ok"].verdict == "no clear difference"
    assert "3 cases: too few to tell" in found["ok"].note
