"""`awf_nb.evaluate` / `aevaluate`: an eval file or keyword arguments, the result object
(`summary`, `rows`, `to_pandas`, `_repr_html_`), and its errors."""

from __future__ import annotations

import sys
import types

import pytest

import awf_nb
from awf_nb.errors import AwfError, UserError
from tests.support.eval_project import Project


def test_evaluate_from_keyword_arguments_with_rows_and_a_simulated_user(project: Project) -> None:
    result = awf_nb.evaluate(
        workflow="wf.yaml",
        dataset=[{"id": "a", "topic": "bread"}, {"id": "b", "topic": "jam"}],
        inputs={"topic": "{{.case.topic}}"},
        user=awf_nb.SimulatedUser(persona="A baker", provider="scripted",
                                  options={"replies": ["and then?", "exit"]}),
        scorers=[
            {"name": "ended", "condition": 'stopped_by == "user_exit"'},
            {"name": "bread", "condition": 'case.topic == "bread"'},
        ],
        epochs=2,
        concurrency=3,
        storage=project.store,
        show=False,
    )  # fmt: skip
    assert isinstance(result, awf_nb.EvalResult)
    assert result.summary.scorers["ended"].pass_rate == 1.0
    assert result.summary.pass_hat == {1: 0.5, 2: 0.5}
    assert sorted((r.case, r.epoch, r.passed) for r in result.rows) == [
        ("a", 1, True), ("a", 2, True), ("b", 1, False), ("b", 2, False)
    ]  # fmt: skip
    html = result._repr_html_()
    assert html.index('awf-eval-fail" data-run-id') < html.index('awf-eval-pass" data-run-id')
    assert "var(--jp-error-color1" in html and "<script" not in html
    assert repr(result).startswith(f"<EvalResult {result.eval_id} chatty: 2/4 passed")


def test_evaluate_an_eval_file_with_overrides(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
    )
    result = awf_nb.evaluate("t.eval.yaml", epochs=3, storage=project.store, show=False)
    assert len(result.rows) == 3 and result.complete


def test_to_pandas_names_the_missing_package(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
    )
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(UserError, match="needs pandas, which awf-nb does not install"):
        result.to_pandas()
    assert result.rows[0].flat()["case"] == "1"  # what each data frame row holds


def test_to_pandas_gives_one_data_frame_row_per_run_and_a_column_per_scorer(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pandas is not a dependency (nor installed for the tests): a stand-in module takes
    # what `to_pandas` hands to `pandas.DataFrame`.
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
        "scorers: [{name: ok, condition: 'status == \"completed\"'}]\nepochs: 2\n"
    )
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    frames: list[object] = []
    pandas = types.ModuleType("pandas")
    pandas.DataFrame = lambda records: frames.append(records) or "frame"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", pandas)
    assert result.to_pandas() == "frame"
    (records,) = frames
    assert sorted((r["case"], r["epoch"], r["ok"], r["ok_score"]) for r in records) == [
        ("a", 1, True, 1.0), ("a", 2, True, 1.0)
    ]  # fmt: skip
    assert {"run_id", "status", "turns", "tokens", "seconds", "passed"} <= set(records[0])


def test_errors_of_the_arguments(project: Project) -> None:
    with pytest.raises(AwfError, match="needs an eval file, or workflow= and dataset="):
        awf_nb.evaluate(workflow="wf.yaml")
    with pytest.raises(
        UserError, match="evaluate\\(\\): epochs: Input should be greater than or equal to 1"
    ):
        awf_nb.evaluate(workflow="wf.yaml", dataset=[{"topic": "x"}], epochs=0,
                        inputs={"topic": "x"}, show=False)  # fmt: skip


async def test_evaluate_inside_a_running_loop_points_to_aevaluate(project: Project) -> None:
    with pytest.raises(AwfError, match="cannot be used inside a running event loop"):
        awf_nb.evaluate("t.eval.yaml")
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
    )
    result = await awf_nb.aevaluate("t.eval.yaml", storage=project.store, show=False)
    assert result.rows[0].passed is True


def test_compare_with_a_baseline_gives_a_typed_comparison(project: Project) -> None:
    from awf_nb.evals.compare import Comparison

    rows = [{"id": f"c{i:02}", "topic": "bread", "a": int(7 <= i < 15), "b": int(i < 15)}
            for i in range(20)]  # fmt: skip

    def scored(field: str) -> object:
        scorers = [{"name": "ok", "condition": f"case.{field} == 1"}]
        return awf_nb.evaluate(
            workflow="wf.yaml", dataset=rows, inputs={"topic": "{{.case.topic}}"},
            scorers=scorers, seed=3, show=False, storage=str(project.store.root),
        )  # fmt: skip

    baseline, candidate = scored("a"), scored("b")
    found = candidate.compare(baseline)
    assert isinstance(found, Comparison)
    assert found["ok"].p_value == pytest.approx(0.015625)
    assert found.verdict == "better" and len(found.flips) == 7
    assert "<pre>" in found._repr_html_()
    with pytest.raises(TypeError, match="another eval's result"):
        candidate.compare(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="of two variants takes both names"):
        candidate.compare("baseline")
