"""The eval table's progress line: runs done out of all, the counts, the time elapsed and
the estimate of what is left (ETA), from this session's pace (a resumed eval's earlier
rows count as done but not as this session's pace). The clock is the module's, set by the
test: no wall-clock timing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from awf_nb.evals.results import EvalResult, EvalRow
from awf_nb.frontends.notebook import eval_table
from awf_nb.frontends.notebook.eval_table import EvalTable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


async def test_the_progress_line_counts_the_runs_and_estimates_what_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(eval_table, "time", clock)
    table = EvalTable()
    # a resumed eval: 2 of its 6 runs were done before
    done = [EvalRow("a", 1, passed=True), EvalRow("b", 1, passed=False)]
    run = SimpleNamespace(
        folder=SimpleNamespace(store=None),
        eval_id="e1",
        scorers=[],
        total=6,
        done=done,
        manifest=SimpleNamespace(variants=[]),
    )
    table.eval_started(run)  # type: ignore[arg-type]
    for case in ("c", "d", "e"):
        table.run_started(case, 1, f"run-{case}")
    assert table.progress.value.startswith("eval e1: 2/6 runs · ✓ 1 ✗ 1 ! 0 · 0 s elapsed")
    assert "ETA" not in table.progress.value  # no pace to go by yet

    clock.now += 30
    table.run_finished(EvalRow("c", 1, passed=True))
    # one run in 30 s, three left: 90 s (times in awf's one format)
    assert table.progress.value == (
        "eval e1: 3/6 runs · ✓ 2 ✗ 1 ! 0 · 30 s elapsed · ETA 1 min 30 s"
    )

    clock.now += 10
    table.run_finished(EvalRow("d", 1, passed=None, error="boom"))
    assert table.progress.value.endswith("4/6 runs · ✓ 2 ✗ 1 ! 1 · 40 s elapsed · ETA 40 s")

    for case in ("e", "f"):
        table.run_finished(EvalRow(case, 1, passed=True))
    table.eval_finished(EvalResult("e1", "w", [], [], 1, status="completed", total=6))
    assert table.progress.value == "eval e1: 6/6 runs · ✓ 4 ✗ 1 ! 1 · 40 s elapsed · completed"


async def test_the_progress_line_says_where_a_remote_eval_runs() -> None:
    table = EvalTable()
    executor = SimpleNamespace(name="ray", describe=lambda n: f"{n} at a time on each of 3 workers")
    run = SimpleNamespace(
        folder=SimpleNamespace(store=None), eval_id="e1", scorers=[], total=6, done=[],
        executor=executor, manifest=SimpleNamespace(concurrency=4, variants=[]),
    )  # fmt: skip
    table.eval_started(run)  # type: ignore[arg-type]
    assert table.progress.value.startswith("eval e1: 0/6 runs · 4 at a time on each of 3 workers ·")


async def test_the_tables_show_bidi_controls_as_marks_not_obeyed() -> None:
    # a case id and a judge's error are untrusted: U+202E would reorder what follows it
    from awf_nb.evals.scorers import ScoreValue

    hostile = EvalRow(
        "evil\u202eid",
        1,
        run_id="r1",
        scores={"j": ScoreValue(None, error="said \u2066SCORE: 5\u2069")},
        passed=None,
        error="the judge\u202bwrote \u2066SCORE: 5\u2069",
    )
    result = EvalResult("e1", "w\u202ef", [hostile], [("j", "judge")], 1, total=1)
    shown = result._repr_html_()
    assert "evil⟨U+202E⟩id" in shown
    assert "the judge⟨U+202B⟩wrote ⟨U+2066⟩SCORE: 5⟨U+2069⟩" in shown and "w⟨U+202E⟩f" in shown
    assert not any(ch in shown for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

    table = EvalTable()
    run = SimpleNamespace(
        folder=SimpleNamespace(store=None), eval_id="e1", scorers=[("j", "judge")], total=1,
        done=[], manifest=SimpleNamespace(variants=[]),
    )  # fmt: skip
    table.eval_started(run)  # type: ignore[arg-type]
    table.run_started("evil\u202eid", 1, "r1")
    table._send_rows()  # what the pending flush sends
    assert table.view.rows[0]["cells"][0] == "evil⟨U+202E⟩id"  # drawn while it runs
    table.run_finished(hostile)
    table._send_rows()
    cells = table.view.rows[0]["cells"]
    assert (
        cells[0] == "evil⟨U+202E⟩id"
        and cells[-1] == "the judge⟨U+202B⟩wrote ⟨U+2066⟩SCORE: 5⟨U+2069⟩"
    )
    static = table.view.static_html()
    assert "evil⟨U+202E⟩id" in static and "\u202e" not in static and "\u2066" not in static


async def test_variants_are_compared_live_and_a_flip_opens_both_conversations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from awf_nb.engine.state import RunState
    from awf_nb.evals.scorers import ScoreValue
    from awf_nb.store import Store

    clock = Clock()
    monkeypatch.setattr(eval_table, "time", clock)
    store = Store(tmp_path)
    table = EvalTable()
    run = SimpleNamespace(
        folder=SimpleNamespace(store=store), eval_id="e1", scorers=[("ok", "condition")],
        total=24, done=[], manifest=SimpleNamespace(variants=["a", "b"]),
    )  # fmt: skip
    table.eval_started(run)  # type: ignore[arg-type]
    assert table.view.header[:3] == ["case", "epoch", "variant"]

    def finish(case: int, variant: str, passed: bool) -> None:
        run_id = f"r-{variant}-{case}"
        state = RunState(run_id=run_id, workflow_name="w")
        store.save_state(state)
        table.run_started(f"c{case:02}", 1, run_id, variant)
        row = EvalRow(f"c{case:02}", 1, run_id=run_id, variant=variant, passed=passed,
                      scores={"ok": ScoreValue(passed, 1.0 if passed else 0.0)})  # fmt: skip
        table.run_finished(row)

    # b passes cases 0..6 that a fails: the first comparison is made at once ...
    for case in range(12):
        finish(case, "a", False)
        finish(case, "b", case < 7)
        if case == 0:
            first = table.comparison.children[0].value
            assert "a → b" in first and "(so far)" in first and "nothing to compare" in first
    # ... and again only when COMPARE_SECONDS have passed (a timer, not every run)
    assert table.comparison.children[0].value == first
    clock.now += eval_table.COMPARE_SECONDS
    table._compare_now()
    assert "12 cases" in table.comparison.children[0].value
    flips = table.comparison.children[1].children
    assert [b.description for b in flips] == [f"+ c{n:02}" for n in range(7)]
    flips[2].click()
    (side,) = table.detail.children
    assert [c.children[0].value for c in side.children] == ["<b>a</b>", "<b>b</b>"]
    rows = [
        EvalRow(f"c{n:02}", 1, run_id=f"r-{v}-{n}", variant=v, passed=(v == "b" and n < 7),
                scores={"ok": ScoreValue(v == "b" and n < 7)})
        for n in range(12) for v in "ab"
    ]  # fmt: skip
    table.eval_finished(EvalResult("e1", "w", rows, [("ok", "condition")], 1, total=24,
                                   variants=["a", "b"]))  # fmt: skip
    summaries, final = (c.value for c in table.comparison.children[:2])
    assert "variant a\n" in summaries and "variant b\n" in summaries  # one summary each
    assert "(so far)" not in final and "7 better, 0 worse" in final


async def test_the_gates_of_the_eval_file_are_shown_when_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from awf_nb.evals.gates import Gate, GateResult

    checked = [GateResult(Gate.parse("passed >= 80%"), False, "passed is 50%")]
    monkeypatch.setattr(EvalResult, "gates", lambda self, extra=(): checked)
    table = EvalTable()
    run = SimpleNamespace(
        folder=SimpleNamespace(store=None), eval_id="e1", scorers=[], total=1, done=[],
        manifest=SimpleNamespace(variants=[]),
    )  # fmt: skip
    table.eval_started(run)  # type: ignore[arg-type]
    table.eval_finished(EvalResult("e1", "w", [], [], 1, total=1))
    (block,) = table.comparison.children
    assert "GATE FAILS  passed &gt;= 80%: passed is 50%" in block.value
