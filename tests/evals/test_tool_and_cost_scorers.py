"""Scorers over what a run did (its tool calls, turns, time, cost) and what an eval costs:
`tools:` scorers and their match modes, `pricing:` into USD, `limits.max_cost` per run,
a `budget` that stops an eval (resumable with a larger one) — from Python and the CLI."""

from __future__ import annotations

import json

import pytest

import awf_nb
from awf_nb.errors import UserError
from awf_nb.evals.storage import EvalFolder
from awf_nb.evals.tool_scorers import sequence_matches
from tests.support.cli import run_awf
from tests.support.eval_project import Project

# An agent that globs, then reads, then answers: its tool calls are [Glob, Read].
TOOLS_WORKFLOW = """\
name: reader
inputs: [{name: topic, required: true}]
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: "Read the notes about {{.inputs.topic}}."
    tools: {builtin: [Read, Glob, Grep]}
    options:
      replies:
        - tool_calls: [{name: Glob, arguments: {pattern: "*.txt"}}]
        - tool_calls: [{name: Read, arguments: {file_path: notes.txt}}]
        - "The notes say: buy milk."
    on_success: done
  done: {type: terminal}
"""

# (scorer's tools: spec, whether it passes on [Glob, Read])
TOOL_CHECKS = {
    "used_read": ("{used: [Read]}", True),
    "not_used_read": ("{not_used: [Read]}", False),
    "not_used_bash": ("{not_used: [Bash]}", True),
    "strict_ok": ("{sequence: [Glob, Read], match: strict}", True),
    "strict_short": ("{sequence: [Read], match: strict}", False),
    "in_order_ok": ("{sequence: [Glob, Read]}", True),
    "in_order_swapped": ("{sequence: [Read, Glob], match: in_order}", False),
    "any_order_ok": ("{sequence: [Read, Glob], match: any_order}", True),
    "any_order_short": ("{sequence: [Read], match: any_order}", False),
    "subset_ok": ("{sequence: [Glob, Read, Grep], match: subset}", True),
    "subset_short": ("{sequence: [Read], match: subset}", False),
    "superset_ok": ("{sequence: [Read], match: superset}", True),
    "superset_more": ("{sequence: [Read, Grep], match: superset}", False),
    "args_ok": ("{args: {Read: {file_path: notes.txt}}}", True),
    "args_other": ("{args: {Read: {file_path: other.txt}}}", False),
}


def tools_eval(project: Project) -> None:
    project.write("reader.yaml", TOOLS_WORKFLOW)
    project.write("notes.txt", "buy milk\n")
    project.rows("cases.jsonl", [{"id": "one", "topic": "shopping"}])
    scorers = "".join(
        f"  - {{name: {name}, tools: {spec}}}\n" for name, (spec, _) in TOOL_CHECKS.items()
    )
    scorers += (
        "  - name: second_is_read\n"
        '    condition: \'len(tool_calls) == 2 && tool_calls[1].name == "Read" && '
        'tool_calls[1].arguments.file_path == "notes.txt"\'\n'
        "  - name: figures\n"
        "    condition: 'turns == 1 && tokens > 0 && seconds >= 0 && cost > 0'\n"
    )
    project.write_eval(
        "workflow: reader.yaml\ndataset: cases.jsonl\n"
        'inputs: {topic: "{{.case.topic}}"}\n'
        "pricing: {scripted: {input: 1, output: 2}}\n"
        f"scorers:\n{scorers}"
    )


@pytest.mark.parametrize(
    ("sequence", "match", "expected"),
    [
        (["A", "B", "C"], "strict", True),
        (["A", "B"], "strict", False),  # C was called too
        (["B", "A"], "strict", False),
        (["A", "C"], "in_order", True),  # B between them is allowed
        (["C", "A"], "in_order", False),
        (["C", "B", "A"], "any_order", True),
        (["A", "B"], "any_order", False),  # C was called too
        (["A", "B", "C", "D"], "subset", True),
        (["A", "B"], "subset", False),
        (["C", "A"], "superset", True),
        (["A", "D"], "superset", False),
    ],
)
def test_sequence_match_modes(sequence: list[str], match: str, expected: bool) -> None:
    assert sequence_matches(["A", "B", "C"], sequence, match) is expected


def test_tools_scorers_see_the_runs_tool_calls_from_python(project: Project) -> None:
    tools_eval(project)
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    (row,) = result.rows
    verdicts = {name: value.passed for name, value in row.scores.items()}
    assert verdicts == {
        **{name: passes for name, (_, passes) in TOOL_CHECKS.items()},
        "second_is_read": True,
        "figures": True,
    }
    assert row.scores["strict_short"].detail == (
        "the calls [Glob, Read] do not match [Read] (strict)"
    )
    assert (
        row.scores["args_other"].detail
        == 'no call of Read with arguments {"file_path": "other.txt"}'
    )
    # the cost is the run's tokens at the scripted provider's price
    state = result.run("one")
    step = state.steps["work"]
    assert row.cost == pytest.approx((step.tokens_input * 1 + step.tokens_output * 2) / 1e6)
    assert result.summary.total_cost == pytest.approx(row.cost)
    assert "cost $" in result.summary.totals_line()


def test_tools_scorers_from_the_command_line(project: Project) -> None:
    tools_eval(project)
    done = run_awf("eval", "t.eval.yaml", "--json", "--storage", str(project.store.root),
                   cwd=project.root)  # fmt: skip
    assert done.returncode == 3, done.stderr  # some checks are meant to fail
    data = json.loads(done.stdout)
    (row,) = data["rows"]
    assert {n: v["passed"] for n, v in row["scores"].items() if n in TOOL_CHECKS} == {
        name: passes for name, (_, passes) in TOOL_CHECKS.items()
    }
    assert row["cost"] > 0 and data["summary"]["total_cost"] == row["cost"]


def test_a_tools_scorer_without_a_check_is_refused_where_it_is(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(
        "workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: x}\n"
        "scorers:\n  - {name: t, tools: {match: strict}}\n"
    )
    done = run_awf("validate", "t.eval.yaml", cwd=project.root)
    assert done.returncode != 0
    assert "tools needs at least one of used, not_used, sequence, args" in done.stdout + done.stderr


# --- cost: a run's limit, an eval's budget -------------------------------------------------

# $1 a token: an eval's cost is its tokens, in dollars.
COST_EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
pricing: {default: {input: 1000000, output: 1000000}}
concurrency: 1
"""


def cost_project(project: Project, cases: int = 5) -> float:
    """Cases of one same topic (every run costs the same); returns what one run costs."""
    project.rows("cases.jsonl", [{"id": f"c{n}", "topic": "bread"} for n in range(cases)])
    project.write_eval(COST_EVAL)
    probe = awf_nb.evaluate("t.eval.yaml", limit=1, storage=project.store, show=False)
    (row,) = probe.rows
    assert row.cost == row.tokens > 0
    return row.cost


def test_max_cost_per_run_is_a_limit_error_in_its_row(project: Project) -> None:
    one = cost_project(project, cases=2)
    project.write_eval(COST_EVAL + f"limits: {{max_cost: {one / 2}}}\n")
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    assert [(r.passed, r.error_kind) for r in result.rows] == [(None, "limit")] * 2
    assert result.rows[0].error == (
        f"limits.max_cost reached: the run cost ${one:.4f}, more than ${one / 2:.4f}"
    )


def test_a_budget_stops_new_runs_and_resume_with_a_larger_one_finishes_the_rest(
    project: Project,
) -> None:
    one = cost_project(project)
    # after 3 runs the eval has spent 3 x one >= 2.5 x one: the 4th does not start
    first = awf_nb.evaluate("t.eval.yaml", budget=2.5 * one, storage=project.store, show=False)
    assert (first.status, first.stopped) == ("stopped", "budget")
    assert sorted(r.case for r in first.rows) == ["c0", "c1", "c2"]
    assert first.summary.total_cost == pytest.approx(3 * one)
    with pytest.raises(UserError, match=r"has spent \$.* of its budget of .*: nothing more"):
        awf_nb.evaluate(resume=first.eval_id, storage=project.store, show=False)
    second = awf_nb.evaluate(
        resume=first.eval_id, budget=100 * one, storage=project.store, show=False
    )
    assert (second.status, second.stopped) == ("completed", "")
    assert sorted(r.case for r in second.rows) == ["c0", "c1", "c2", "c3", "c4"]
    folder = EvalFolder.open(project.store, first.eval_id)
    started = [(r["case"], r["epoch"]) for r in folder.runs()]
    assert started == [("c0", 1), ("c1", 1), ("c2", 1), ("c3", 1), ("c4", 1)]  # each once


def test_a_budget_from_the_command_line_then_resume(project: Project) -> None:
    one = cost_project(project)
    storage = ["--storage", str(project.store.root)]
    done = run_awf("eval", "t.eval.yaml", "--budget", str(1.5 * one), *storage, cwd=project.root)
    assert done.returncode == 3
    assert "stopped: budget: eval" in done.stderr
    eval_id = done.stderr.split("stopped: budget: eval ", 1)[1].split()[0]
    assert "awf eval --resume " + eval_id + " --budget USD" in done.stderr
    rows = EvalFolder.open(project.store, eval_id).rows()
    assert sorted(r.case for r in rows) == ["c0", "c1"]
    again = run_awf("eval", "--resume", eval_id, "--budget", str(100 * one), "--json", *storage,
                    cwd=project.root)  # fmt: skip
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["status"] == "completed" and len(data["rows"]) == 5
    assert [r["case"] for r in EvalFolder.open(project.store, eval_id).runs()] == [
        "c0", "c1", "c2", "c3", "c4"
    ]  # fmt: skip


def test_a_budget_must_be_a_positive_number(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(COST_EVAL)
    with pytest.raises(UserError, match="--budget must be a positive number of USD, got -1"):
        awf_nb.evaluate("t.eval.yaml", budget=-1, storage=project.store, show=False)


def test_a_budget_is_refused_on_ray_before_anything_connects(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(COST_EVAL)
    with pytest.raises(UserError, match="a budget stops an eval's runs with the local executor"):
        awf_nb.evaluate("t.eval.yaml", budget=1, executor="ray", storage=project.store, show=False)
    assert not (project.store.root / "evals").exists() or not any(
        (project.store.root / "evals").iterdir()
    )


def test_max_cost_stops_a_run_before_the_turn_that_would_go_past_it(project: Project) -> None:
    one = cost_project(project, cases=1)  # what the agent's first reply costs
    project.rows(
        "cases.jsonl", [{"id": "c0", "topic": "bread", "replies": ["more", "more", "more"]}]
    )
    project.write_eval(COST_EVAL + f"limits: {{max_cost: {one}}}\n")
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    (row,) = result.rows
    assert (row.status, row.error_kind, row.turns) == ("failed", "limit", 1)
    assert row.error == (
        f"run stopped at step chat: limits.max_cost (${one:.4f}) reached (${one:.4f} spent)"
    )


def test_the_notebook_magic_takes_a_budget(project: Project) -> None:
    from awf_nb.frontends.notebook.eval_magic import _parse, _prepare

    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(COST_EVAL)
    args = _parse(f"t.eval.yaml --budget 1.5 --storage {project.store.root}")
    run = _prepare(args, "")
    assert run.manifest.budget == 1.5


def test_a_cost_the_provider_reported_wins_over_pricing() -> None:
    from awf_nb.engine.state import RunState, StepState
    from awf_nb.evals.model import Price
    from awf_nb.evals.pricing import run_cost
    from awf_nb.workflow.loader import load_text
    from tests.support.eval_project import CHAT_WORKFLOW

    workflow = load_text(CHAT_WORKFLOW)
    state = RunState(run_id="r", workflow_name="chatty")
    state.steps["chat"] = StepState(name="chat", tokens_input=1000, tokens_output=1000)
    priced = {"scripted": Price(input=1, output=1)}
    assert run_cost(priced, workflow, state) == pytest.approx(0.002)  # 2000 tokens at $1/M
    assert run_cost({}, workflow, state) is None  # no price: unknown, not free
    state.steps["chat"].reported_cost_usd = 0.25  # an agent CLI said what its turns cost
    assert run_cost(priced, workflow, state) == 0.25
    assert run_cost({}, workflow, state) == 0.25
