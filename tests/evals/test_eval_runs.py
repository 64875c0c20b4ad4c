"""Whole evals with the scripted provider: known outcomes for every scorer kind, epochs and
pass^k, scripted replies against a simulated user, limits, an erroring judge, set-up errors,
and each run an ordinary run in the store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from awf_nb.evals.api import open_eval, prepare_eval
from awf_nb.evals.results import EvalResult
from tests.support.eval_project import Project

GRADER = """\
import json, sys
run = json.load(sys.stdin)
print(len(run["messages"]))
print("graded", run["case_id"], file=sys.stderr)
sys.exit(0 if run["case"]["id"] == "a" else 1)
"""


async def run_eval(project: Project, path: Path, **kwargs: object) -> EvalResult:
    run = prepare_eval(path, storage=project.store, **kwargs)  # type: ignore[arg-type]
    return await run.execute()


def by_key(result: EvalResult) -> dict[tuple[str, int], object]:
    return {row.key: row for row in result.rows}


async def test_every_scorer_kind_with_known_outcomes(project: Project) -> None:
    project.rows(
        "cases.jsonl",
        [
            {"id": "a", "topic": "bread", "replies": ["more please", "exit"]},
            {"id": "b", "topic": "yeast"},
        ],
    )
    project.write("grade.py", GRADER)
    path = project.write_eval(
        f"""\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {{topic: "{{{{.case.topic}}}}"}}
        user:
          provider: scripted
          options: {{replies: ["tell me more", "exit"]}}
          persona: "You care about {{{{.case.topic}}}}"
        scorers:
          - name: ended
            condition: 'stopped_by == "user_exit" and status == "completed"'
          - name: yeast
            condition: 'transcript contains "yeast"'
          - name: judge
            judge:
              provider: scripted
              options: {{replies: ["I would say 4 out of 5.\\nSCORE: 4"]}}
              prompt: "Rate the talk about {{{{.case.topic}}}}: {{{{.transcript}}}}"
              pass: ">= 4"
          - name: grader
            command: {sys.executable} grade.py
        epochs: 2
        """
    )
    result = await run_eval(project, path)
    assert result.status == "completed" and len(result.rows) == 4 == result.total
    rows = by_key(result)
    a1, b1 = rows[("a", 1)], rows[("b", 1)]
    # case a: its own replies play the person ("more please", then exit)
    assert a1.stopped_by == "user_exit" and a1.turns == 2
    state = project.store.load_state(a1.run_id)  # an ordinary run in the store
    turns = state.steps["chat"].conversation.turns
    assert [t.content for t in turns if t.role == "user"][1] == "more please"
    # case b: the simulated user plays the person
    b_turns = project.store.load_state(b1.run_id).steps["chat"].conversation.turns
    assert [t.speaker for t in b_turns if t.role == "user"][1] == "user (simulated)"
    assert {k: v.passed for k, v in a1.scores.items()} == {
        "ended": True,
        "yeast": False,
        "judge": True,
        "grader": True,
    }
    assert {k: v.passed for k, v in b1.scores.items()} == {
        "ended": True,
        "yeast": True,
        "judge": True,
        "grader": False,
    }
    assert (
        a1.scores["judge"].score == 4.0
        and a1.scores["judge"].detail == '"I would say 4 out of 5. SCORE: 4"'
    )
    assert a1.scores["grader"].score == 4.0  # the first line of its output
    assert a1.judge_tokens > 0
    assert [r.passed for r in result.rows] == [False] * 4
    summary = result.summary
    assert summary.scorers["ended"].pass_rate == 1.0
    assert summary.scorers["yeast"].pass_hat == {1: 0.5, 2: 0.5}
    assert summary.scorers["grader"].pass_rate == 0.5
    # the eval's folder holds the same rows
    assert [r.as_dict() for r in open_eval(result.eval_id, storage=project.store).rows] == [
        r.as_dict() for r in result.rows
    ]


async def test_epochs_differ_and_pass_k_drops_for_a_case_that_passes_only_sometimes(
    project: Project,
) -> None:
    # The agent's reply depends on the run's seed (even or odd): an unreliable workflow.
    project.write(
        "coin.yaml",
        """\
        name: coin
        states:
          initial: flip
          flip:
            type: step
            command: 'echo $(( $AWF_EVAL_SEED % 2 ))'
            on_success: done
          done: {type: terminal}
        """,
    )
    project.rows("cases.jsonl", [{"id": "x"}])
    path = project.write_eval(
        """\
        workflow: coin.yaml
        dataset: cases.jsonl
        scorers:
          - name: heads
            condition: 'states.flip.Output == "1"'
        epochs: 6
        seed: 3
        """
    )
    # the seed of each run reaches commands as $AWF_EVAL_SEED
    result = await run_eval(project, path)
    seeds = sorted(row.seed for row in result.rows)
    assert len(set(seeds)) == 6  # every epoch its own seed
    heads = sum(row.seed % 2 for row in result.rows)
    assert sum(row.passed for row in result.rows) == heads
    hats = result.summary.scorers["heads"].pass_hat
    assert hats[1] == heads / 6
    assert hats[6] == (1.0 if heads == 6 else 0.0)
    again = await run_eval(project, path)  # same seed, same runs
    assert sorted(row.seed for row in again.rows) == seeds


async def test_limits_of_the_eval_stop_a_run_which_fails_not_errs(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        user:
          provider: scripted
          options: {replies: ["go on", "go on", "go on", "exit"]}
          persona: p
        limits: {max_agent_turns: 2}
        """
    )
    result = await run_eval(project, path)
    (row,) = result.rows
    assert row.status == "failed" and row.error_kind == "limit"
    assert "limits.max_agent_turns (2) reached" in row.error
    assert row.passed is False  # no scorers: a run that failed did not pass
    # A failed row, not an error: the counts and the kinds of errors agree.
    summary = result.summary
    assert (summary.passed, summary.failed, summary.errors) == (0, 1, 0)
    assert summary.errors_by_kind == {}
    assert "errors: limit" not in summary.totals_line()


async def test_an_erroring_judge_is_an_error_in_its_cell_not_a_crash(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "a"}, {"topic": "b"}])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: broken
            judge:
              provider: scripted
              options: {replies: [{error: "the judge's model is down"}]}
              prompt: "rate"
              pass: ">= 4"
          - name: wordy
            judge:  # unreadable three times: asked again twice (judge.retries), then an error
              provider: scripted
              options: {replies: ["excellent", "excellent", "excellent"]}
              prompt: rate
              pass: ">= 4"
          - name: fine
            condition: 'status == "completed"'
        """
    )
    result = await run_eval(project, path)
    assert len(result.rows) == 2
    for row in result.rows:
        assert row.passed is None and row.outcome == "error" and row.error_kind == "scorer"
        assert "the judge's model is down" in row.scores["broken"].error
        assert row.scores["wordy"].error == (
            'scorer wordy: the judge\'s answer has no verdict line "SCORE: <number>": "excellent" '
            "(asked 3 times)"
        )
        assert row.scores["wordy"].retries == 2
        assert row.scores["fine"].passed is True
    assert result.summary.scorers["broken"].errors == 2
    assert result.summary.errors == 2


async def test_an_input_template_that_does_not_render_is_a_setup_error_of_that_row(
    project: Project,
) -> None:
    project.rows("cases.jsonl", [{"topic": {"name": "ok"}}, {"topic": "plain text"}])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: '{{.case.topic.name}}'}
        """
    )
    result = await run_eval(project, path)
    rows = by_key(result)
    assert rows[("1", 1)].status == "completed" and rows[("1", 1)].passed is True
    bad = rows[("2", 1)]
    assert bad.error_kind == "setup" and bad.run_id == "" and bad.passed is None
    assert bad.error.startswith(
        'inputs.topic: template "inputs.topic": can\'t evaluate field "name"'
    )


async def test_confirm_tools_are_refused_unless_the_eval_says_yes(project: Project) -> None:
    project.write(
        "tools.yaml",
        """\
        name: tooly
        states:
          initial: act
          act:
            type: agent
            provider: scripted
            mode: conversation
            prompt: go
            tools: {builtin: [Write], confirm: [Write]}
            options:
              replies:
                - {tool_calls: [{name: Write, arguments: {file_path: out.txt, content: hi}}]}
                - done
            on_success: end
          end: {type: terminal}
        """,
    )
    project.rows("cases.jsonl", [{"id": "x"}])
    scorer = "scorers: [{name: wrote, condition: 'transcript contains \"done\"'}]\n"
    refused = await run_eval(
        project, project.write_eval(f"workflow: tools.yaml\ndataset: cases.jsonl\n{scorer}")
    )
    assert refused.rows[0].status == "completed"
    assert not (project.root / "out.txt").exists()
    # What the model (and whoever reads the run) is told names the eval file's way.
    transcript = project.store.read_transcript(refused.rows[0].run_id)
    (told,) = [r["content"] for r in transcript if r.get("role") == "tool"]
    assert "yes: true in an eval file" in told
    allowed = await run_eval(
        project,
        project.write_eval(
            f"workflow: tools.yaml\ndataset: cases.jsonl\nyes: true\n{scorer}", "y.eval.yaml"
        ),
    )
    assert allowed.rows[0].status == "completed"
    assert (project.root / "out.txt").read_text() == "hi"


async def test_limit_and_epoch_overrides_and_the_json_of_a_result(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": t} for t in "abcde"])
    path = project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\nepochs: 3\n'
    )
    result = await run_eval(project, path, limit=2, epochs=1, concurrency=2)
    assert sorted(row.key for row in result.rows) == [("1", 1), ("2", 1)]
    data = json.loads(result.to_json())
    assert data["summary"]["rows"] == 2 and data["total"] == 2
    assert all(row["outcome"] == "pass" for row in data["rows"])


async def test_secrets_are_masked_in_everything_a_row_shows(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2-very-secret")
    project.write(
        "leaky.yaml",
        """\
        name: leaky
        env: [SECRET_TOKEN]
        states:
          initial: say
          say: {type: step, command: 'echo "token is $SECRET_TOKEN"', on_success: done}
          done: {type: terminal}
        """,
    )
    project.rows("cases.jsonl", [{"id": "x"}])
    path = project.write_eval(
        """\
        workflow: leaky.yaml
        dataset: cases.jsonl
        scorers:
          - name: grader
            command: 'cat >&2; echo " and $SECRET_TOKEN" >&2; exit 1'
          - name: judge
            judge:
              provider: scripted    # no replies: it echoes the prompt it is sent
              prompt: 'what the run said: {{.states.say.Output}}'
              pass: ">= 1"
        """
    )
    result = await run_eval(project, path)
    shown = json.dumps(result.rows[0].as_dict())
    assert "hunter2-very-secret" not in shown
    assert result.rows[0].scores["grader"].detail.endswith(" and ***")
    assert "token is ***" in project.store.load_state(result.rows[0].run_id).steps["say"].output
    assert result.rows[0].scores["judge"].detail.startswith('"what the run said: token is *** ')


def test_the_eval_s_limits_go_on_top_of_the_workflow_s_own() -> None:
    from awf_nb.evals.run_setup import with_limits
    from awf_nb.workflow.loader import load_text
    from awf_nb.workflow.model import Limits

    workflow = load_text(
        "name: w\nlimits: {max_tokens: 500, timeout: 60, max_visits: {a: 3, b: 2}}\n"
        "states:\n  initial: a\n  a: {type: step, command: 'true', on_success: b}\n"
        "  b: {type: step, command: 'true', on_success: d}\n  d: {type: terminal}\n"
    )
    merged = with_limits(
        workflow, Limits(max_agent_turns=4, max_tokens=900, timeout=30, max_visits={"a": 1})
    ).limits
    assert (merged.max_agent_turns, merged.max_tokens, merged.timeout) == (4, 500, 30)
    assert merged.max_visits == {"a": 1, "b": 2}
    assert workflow.limits.max_tokens == 500 and workflow.limits.max_visits == {"a": 3, "b": 2}
    assert with_limits(workflow, Limits()) is workflow
