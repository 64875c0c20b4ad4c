"""`awf eval-rescore EVAL_ID [--scorers FILE]` and `awf_nb.evals.api.rescore`: the stored
runs of an eval scored again as a new eval (`rescored_from`), no run started and no model
called — the same rows for the same scorers, new verdicts for changed ones."""

from __future__ import annotations

import json

import pytest

import awf_nb
import awf_nb.providers
from awf_nb.errors import UserError
from awf_nb.evals.api import rescore
from awf_nb.evals.results import EvalResult
from awf_nb.evals.storage import EvalFolder
from tests.support.cli import run_awf
from tests.support.eval_project import SERVED_WORKFLOW, Project
from tests.support.openai_server import OpenAIServer, Reply

EVAL = """\
workflow: wf2.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
user:
  provider: openai_compatible
  options: {base_url: "{{.env.SERVER}}", model: m}
  persona: "You want {{.case.topic}}"
  max_turns: 2
scorers:
  - {name: long, condition: 'turns >= 2'}
  - {name: greeted, condition: 'transcript contains "Hello"'}
pricing: {m: {input: 2, output: 4}}
epochs: 2
"""

CHANGED = """\
scorers:
  - {name: long, condition: 'turns >= 3'}
  - {name: bread, condition: 'case.topic == "bread"'}
"""


@pytest.fixture
def served(project: Project, monkeypatch: pytest.MonkeyPatch):
    with OpenAIServer(default_reply=Reply.text("Hello there")) as server:
        monkeypatch.setenv("SERVER", server.base_url)
        project.write("wf2.yaml", SERVED_WORKFLOW)
        project.rows(
            "cases.jsonl", [{"id": "bread", "topic": "bread"}, {"id": "jam", "topic": "jam"}]
        )
        project.write_eval(EVAL)
        project.write("changed.yaml", CHANGED)
        yield server


def by_key(result: EvalResult) -> list[dict[str, object]]:
    return [row.as_dict() for row in sorted(result.rows, key=lambda r: r.key)]


async def test_rescore_from_python_same_scorers_same_rows_changed_scorers_new_rows(
    project: Project, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await awf_nb.aevaluate("t.eval.yaml", storage=project.store, show=False)
    assert first.status == "completed" and len(first.rows) == 4
    assert all(row.passed is True and row.cost for row in first.rows)
    asked = len(served.requests)

    def no_provider(name: str) -> object:
        raise AssertionError(f"rescoring made provider {name}")

    monkeypatch.setattr(awf_nb.providers, "create_provider", no_provider)
    same = await rescore(first.eval_id, storage=project.store)
    assert same.eval_id != first.eval_id and same.rescored_from == first.eval_id
    assert by_key(same) == by_key(first)  # the same runs, scores, costs and times
    changed = await awf_nb.aevaluate(
        rescore=first.eval_id, scorers="changed.yaml", storage=project.store
    )
    assert changed.scorers == [("long", "condition"), ("bread", "condition")]
    assert sorted((r.case, r.epoch, r.passed) for r in changed.rows) == [
        ("bread", 1, False), ("bread", 2, False), ("jam", 1, False), ("jam", 2, False)
    ]  # fmt: skip
    assert {r.case: r.scores["bread"].passed for r in changed.rows} == {"bread": True, "jam": False}
    assert [r.run_id for r in sorted(changed.rows, key=lambda r: r.key)] == [
        r.run_id for r in sorted(first.rows, key=lambda r: r.key)
    ]
    assert len(served.requests) == asked  # no model was asked anything
    # the rescored eval is listed and shown like any other; it has no runs of its own
    reopened = EvalFolder.open(project.store, changed.eval_id).result()
    assert reopened.rescored_from == first.eval_id and reopened.status == "completed"
    with pytest.raises(UserError, match=f"scores the runs of eval {first.eval_id} again"):
        await awf_nb.aevaluate(resume=changed.eval_id, storage=project.store, show=False)


def test_rescore_from_the_command_line(project: Project, served: OpenAIServer) -> None:
    storage = ["--storage", str(project.store.root)]
    done = run_awf("eval", "t.eval.yaml", "--json", *storage, cwd=project.root)
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)
    asked = len(served.requests)
    same = run_awf("eval-rescore", first["eval_id"], "--json", *storage, cwd=project.root)
    assert same.returncode == 0, same.stderr
    again = json.loads(same.stdout)
    assert again["rescored_from"] == first["eval_id"]
    key = lambda r: (r["case"], r["epoch"])  # noqa: E731
    assert sorted(again["rows"], key=key) == sorted(first["rows"], key=key)
    changed = run_awf("eval-rescore", first["eval_id"][:15], "--scorers", "changed.yaml",
                      *storage, cwd=project.root)  # fmt: skip
    assert changed.returncode == 3, changed.stderr
    assert f"the runs of eval {first['eval_id']} scored again" in changed.stdout
    assert "bread" in changed.stdout and "condition" in changed.stdout
    assert len(served.requests) == asked  # no model was asked anything


def test_a_bad_scorers_file_is_refused_where_it_is(project: Project, served: OpenAIServer) -> None:
    project.write("bad.yaml", "scorers:\n  - {name: x, condition: 'turns >'}\n")
    done = run_awf("eval-rescore", "nothing", "--scorers", "bad.yaml",
                   "--storage", str(project.store.root), cwd=project.root)  # fmt: skip
    assert done.returncode != 0
    assert "bad.yaml:2:" in done.stderr and "condition" in done.stderr
