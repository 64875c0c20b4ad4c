"""Gates and `--vs-eval` through the real `awf` command line: exit codes 0 / 3 / 1, the
pairing errors, and `awf eval-show A --vs B` with its statistics (known outcomes)."""

from __future__ import annotations

import json

import pytest

from awf_nb.cli import main
from tests.support.eval_project import Project

EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
scorers:
  - name: ok
    condition: 'case.FIELD == 1'
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def storage(project: Project) -> list[str]:
    # B passes every case A passes and 7 more: better on exactly 7 of 20, worse on 0
    rows = [
        {"id": f"c{i:02}", "topic": "bread", "a": int(i >= 7 and i < 15), "b": int(i < 15)}
        for i in range(20)
    ]
    project.rows("cases.jsonl", rows)
    return ["--storage", str(project.store.root)]


def _eval(project: Project, capsys: pytest.CaptureFixture[str], field: str, *argv: str):
    project.write_eval(EVAL.replace("FIELD", field))
    return run(capsys, "eval", "t.eval.yaml", "--seed", "5", *argv)


def test_gates_pass_fail_and_undecided_exit_codes(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # no gate: today's meaning (a run failed -> 3)
    assert _eval(project, capsys, "b", *storage)[0] == 3
    code, out, _ = _eval(project, capsys, "b", "--gate", "passed >= 75%", *storage)
    assert code == 0 and "gate holds  passed >= 75%: passed is 75%" in out
    code, out, _ = _eval(project, capsys, "b", "--gate", "ok >= 80%", *storage)
    assert code == 3 and "GATE FAILS  ok >= 80%: ok is 75%" in out
    code, out, _ = _eval(project, capsys, "b", "--gate", "nope.mean >= 3", *storage)
    assert code == 1 and "no scorer 'nope'" in out
    # a gate in the file, plus one on the line
    project.write_eval(EVAL.replace("FIELD", "b") + "gate:\n  - passed >= 70%\n")
    assert run(capsys, "eval", "t.eval.yaml", *storage)[0] == 0
    code, out, _ = run(capsys, "eval", "t.eval.yaml", "--gate", "passed > 90%", *storage)
    assert code == 3 and "gate holds  passed >= 70%" in out and "GATE FAILS  passed > 90%" in out
    code, _, err = _eval(project, capsys, "b", "--gate", "passed >= lots", *storage)
    assert code == 1 and "--gate: gate 'passed >= lots' is not understood" in err


def test_a_bad_gate_in_the_file_is_a_located_error(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL.replace("FIELD", "b") + "gate:\n  - passed about 70\n")
    code, _, err = run(capsys, "eval", "t.eval.yaml", *storage)
    assert code != 0 and "t.eval.yaml:" in err and "is not understood" in err


def test_vs_eval_compares_with_the_baseline_and_gates_on_no_regression(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _eval(project, capsys, "a", "--json", *storage)
    base = json.loads(out)["eval_id"]
    code, out, _ = _eval(
        project, capsys, "b", "--vs-eval", base, "--gate", "no_regression: baseline", "--json",
        *storage,
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    ok = next(s for s in data["comparison"]["scorers"] if s["scorer"] == "ok")
    assert (ok["better"], ok["worse"], ok["cases"]) == (7, 0, 20)
    assert ok["p_value"] == pytest.approx(0.015625) and ok["verdict"] == "better"
    assert [f["case"] for f in ok["flips"]] == [f"c{i:02}" for i in range(7)]
    assert all(f["a_runs"] and f["b_runs"] for f in ok["flips"])
    assert data["gates"] == [
        {
            "gate": "no_regression: baseline",
            "holds": True,
            "detail": "no scorer significantly worse",
        }
    ]
    # the other way round, B is the baseline: A is significantly worse -> gate fails
    code, out, _ = _eval(
        project, capsys, "a", "--vs-eval", data["eval_id"], "--gate", "no_regression: baseline",
        *storage,
    )  # fmt: skip
    assert code == 3 and "GATE FAILS  no_regression: baseline" in out and "ok" in out

    # eval-show --vs gains the same statistics
    code, out, _ = run(capsys, "eval-show", base, "--vs", data["eval_id"], *storage)
    assert code == 0 and "7 cases flipped" in out
    assert "ok (pass rate): +35 pts [95% CI" in out and "p=0.01562" in out and ": better" in out
    code, out, _ = run(capsys, "eval-show", base, "--vs", data["eval_id"], "--json", *storage)
    assert json.loads(out)["comparison"]["scorers"][0]["p_value"] == pytest.approx(0.015625)


def test_vs_eval_refuses_a_baseline_that_does_not_pair(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _eval(project, capsys, "a", "--json", *storage)
    base = json.loads(out)["eval_id"]
    code, _, err = _eval(project, capsys, "b", "--vs-eval", base, "--limit", "5", *storage)
    assert code == 1 and f"--vs-eval {base}: its cases do not match this eval's by id" in err
    code, _, err = _eval(project, capsys, "b", "--vs-eval", base, "--epochs", "2", *storage)
    assert code == 1 and f"--vs-eval {base}: it ran 1 epochs, this eval runs 2" in err
    project.write_eval(EVAL.replace("FIELD", "b"))
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--seed", "6", "--vs-eval", base, *storage)
    assert code == 1 and "were sampled with another seed than this eval's (6)" in err
    # a refused comparison leaves no eval behind: only the baseline is listed
    code, out, _ = run(capsys, "evals", "--json", *storage)
    assert [e["eval_id"] for e in json.loads(out)] == [base]
