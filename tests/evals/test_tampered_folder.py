"""An eval folder changed by hand (or by a torn disk) is read back checked: every problem
is an error naming the file and the line, never an internal error, a hang or a rerun; one
bad eval never hides the others in `awf evals`; text from the folder is printed escaped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_awf
from tests.support.eval_project import Project

ECHO = """\
name: echo
states:
  initial: say
  say:
    type: step
    command: echo passed
    on_success: done
  done: {type: terminal}
"""


def make_eval(project: Project) -> Path:
    """A finished eval of two cases: its folder."""
    project.write("echo.yaml", ECHO)
    project.rows("cases.jsonl", [{"id": "a"}, {"id": "b"}])
    project.write_eval(
        "workflow: echo.yaml\ndataset: cases.jsonl\n"
        "scorers: [{name: ok, condition: 'states.say.Output startsWith \"passed\"'}]\n"
    )
    done = awf(project, "eval", "t.eval.yaml")
    assert done.returncode == 0, done.stderr
    return newest(project)


def newest(project: Project) -> Path:
    return sorted((project.store.root / "evals").iterdir())[-1]


def awf(project: Project, *args: str):  # type: ignore[no-untyped-def]
    return run_awf(*args, "--storage", str(project.store.root), cwd=project.root)


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_a_garbage_result_line_hides_no_eval(project: Project) -> None:
    damaged = make_eval(project)
    healthy = make_eval(project)
    with (damaged / "results.jsonl").open("a") as results:
        results.write("this is not json\n")
    listed = awf(project, "evals")
    assert listed.returncode == 0
    assert "no evals yet" not in listed.stderr
    assert damaged.name in listed.stdout and "unreadable" in listed.stdout
    assert healthy.name in listed.stdout and "completed" in listed.stdout
    assert "results.jsonl:3: not JSON" in listed.stderr
    shown = awf(project, "eval-show", damaged.name)
    assert shown.returncode == 1 and "results.jsonl:3: not JSON" in shown.stderr
    assert "internal error" not in shown.stderr


def test_a_result_row_of_the_wrong_shape_is_a_located_error(project: Project) -> None:
    folder = make_eval(project)
    rows = (folder / "results.jsonl").read_text().splitlines()
    first = json.loads(rows[0])
    first["scores"] = 5
    (folder / "results.jsonl").write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
    shown = awf(project, "eval-show", folder.name)
    assert shown.returncode == 1
    assert "internal error" not in shown.stderr
    assert "results.jsonl:1: not a result row" in shown.stderr


def test_an_absurd_epoch_count_in_the_manifest_is_refused_not_planned(project: Project) -> None:
    folder = make_eval(project)
    edit_json(folder / "manifest.json", epochs=1e9, status="running", pid=0)
    listed = awf(project, "evals")
    assert listed.returncode == 0 and "unreadable" in listed.stdout
    assert '"epochs" must be a whole number, not 1000000000.0' in listed.stderr
    edit_json(folder / "manifest.json", epochs=1_000_000_000)
    resumed = awf(project, "eval", "--resume", folder.name)
    assert resumed.returncode == 1
    assert '"epochs" must be from 1 to 100, not 1,000,000,000' in resumed.stderr
    assert (
        not (project.store.root / "runs").exists()
        or len(list((project.store.root / "runs").iterdir())) == 2
    )  # the two runs of the eval itself, and nothing more


def test_an_escape_sequence_in_the_manifest_is_printed_escaped(project: Project) -> None:
    folder = make_eval(project)
    edit_json(folder / "manifest.json", workflow="echo\x1b]0;pwned\x07\x1b[2J", status="running")
    (folder / "results.jsonl").write_text("")  # both runs to do again
    resumed = awf(project, "eval", "--resume", folder.name)
    assert resumed.returncode == 0, resumed.stderr
    assert "\x1b" not in resumed.stderr and "\x07" not in resumed.stderr
    listed = awf(project, "evals")
    assert "\x1b" not in listed.stdout


def test_a_case_twice_in_the_saved_cases_is_refused_not_rerun(project: Project) -> None:
    folder = make_eval(project)
    cases = (folder / "cases.jsonl").read_text().splitlines()
    (folder / "cases.jsonl").write_text("\n".join([*cases, cases[0]]) + "\n")
    edit_json(folder / "manifest.json", status="running")
    (folder / "results.jsonl").write_text("")
    runs_before = len(list((project.store.root / "runs").iterdir()))
    resumed = awf(project, "eval", "--resume", folder.name)
    assert resumed.returncode == 1
    assert "cases.jsonl:3: case 'a' is also on line 1" in resumed.stderr
    assert len(list((project.store.root / "runs").iterdir())) == runs_before
