"""`awf eval`, `awf evals`, `awf eval-show`: output, JSON, exit codes, comparing evals."""

from __future__ import annotations

import json
import re

import pytest

from awf_nb.cli import main
from tests.support.eval_project import Project

EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
scorers:
  - name: mentions
    condition: 'transcript contains "WORD"'
"""


@pytest.fixture
def storage(project: Project) -> list[str]:
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}, {"id": "b", "topic": "yeast"}])
    return ["--storage", str(project.store.root)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_awf_eval_prints_progress_failures_and_the_summary(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL.replace("WORD", "yeast"))
    code, out, err = run(capsys, "eval", "t.eval.yaml", *storage)
    assert code == 3  # a run did not pass
    assert "FAIL  case a epoch 1" in err and "mentions: fail" in err
    assert "case b" not in err  # passing runs get no line
    assert "mentions" in out and "pass^1" in out and "50%" in out
    assert "2 runs of 2 cases; 1 passed, 1 failed, 0 errors" in out
    assert re.search(r"; \d+\.\d\d s of runs", out), out  # the one duration format


def test_json_prints_only_json_and_all_passing_exits_0(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL.replace("WORD", "answer"))
    code, out, err = run(capsys, "eval", "t.eval.yaml", "--json", "--epochs", "2", *storage)
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["summary"]["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert len(data["rows"]) == 4


def test_evals_and_eval_show_with_case_failed_and_vs(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL.replace("WORD", "yeast"))
    first = json.loads(run(capsys, "eval", "t.eval.yaml", "--json", *storage)[1])["eval_id"]
    project.write_eval(EVAL.replace("WORD", "bread"))
    second = json.loads(run(capsys, "eval", "t.eval.yaml", "--json", *storage)[1])["eval_id"]
    code, out, _ = run(capsys, "evals", "--json", *storage)
    newer, older = json.loads(out)
    assert (newer["eval_id"], older["eval_id"]) == (second, first)  # newest first
    assert newer["workflow"] == "chatty" and newer["runs"] == newer["total"] == 2
    # when each started and stopped, and each scorer's pass rate
    manifest = json.loads((project.store.root / "evals" / second / "manifest.json").read_text())
    assert (newer["created_at"], newer["finished_at"]) == (
        manifest["created_at"], manifest["finished_at"]
    )  # fmt: skip
    assert newer["created_at"] < newer["finished_at"]
    assert (newer["scorers"], older["scorers"]) == ({"mentions": 0.5}, {"mentions": 0.5})
    code, out, _ = run(capsys, "evals", *storage)
    header, *lines = out.splitlines()
    assert "STARTED (UTC)" in header and len(lines) == 2
    started = manifest["created_at"][:19].replace("T", " ")
    assert lines[0].startswith(second) and f"  {started}  completed" in lines[0]

    code, out, _ = run(capsys, "eval-show", older["eval_id"], "--failed", *storage)
    assert code == 0
    assert re.search(r"\btime\b", out) and re.search(r" \d+\.\d\d s ", out), out
    assert " a " in out and " b " not in out.split("eval ")[1].split("scorer")[0]

    code, out, _ = run(capsys, "eval-show", older["eval_id"], "--case", "a", *storage)
    assert "── case a epoch 1: fail" in out
    assert "user: Let us talk about bread" in out and "assistant: first answer about bread" in out

    code, out, _ = run(capsys, "eval-show", older["eval_id"], "--vs", newer["eval_id"], *storage)
    assert "2 cases flipped" in out
    assert "+ a  fail" in out and "- b  pass" in out

    code, _, err = run(capsys, "eval-show", older["eval_id"], "--case", "c", *storage)
    assert code == 1 and 'has no finished run of case "c"' in err


def test_bad_command_lines(
    project: Project, storage: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_eval(EVAL)
    code, _, err = run(capsys, "eval", *storage)
    assert code == 1 and "awf eval needs an eval FILE (or --resume EVAL_ID)" in err
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--concurrency", "0", *storage)
    assert code == 1 and "--concurrency must be a whole number from 1 to 1000, got 0" in err
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--replay", "nowhere", *storage)
    assert code == 1 and 'no cassette for case "a" epoch 1' in err
    code, _, err = run(capsys, "eval", "t.eval.yaml", "--workers", "2", *storage)
    assert code == 1 and "--ray-address and --workers are options of --executor ray" in err
    code, _, err = run(capsys, "eval-show", "nope", *storage)
    assert code == 1 and 'eval "nope" not found' in err
