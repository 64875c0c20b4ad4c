"""Judges you can trust: an unreadable answer is asked again (counted apart from errors),
a criteria judge gives a verdict and a reason per criterion, `samples: N` gives the mean
with the samples' agreement — from Python and from the command line."""

from __future__ import annotations

import json

import pytest

import awf_nb
from awf_nb.evals.judges import agreement, criteria_verdict
from tests.support.cli import run_awf
from tests.support.eval_project import Project
from tests.support.openai_server import OpenAIServer, Reply

BAD = Reply.text("A fine conversation, I would say four.")
GOOD = Reply.text("Helpful.\nSCORE: 4")

EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
concurrency: 1
scorers:
  - name: helpful
    judge:
      provider: openai_compatible
      options: {base_url: "{{.env.JUDGE}}", model: judge}
      prompt: "Rate {{.transcript}}"
      pass: ">= 3"
"""


@pytest.fixture
def judge_server(project: Project, monkeypatch: pytest.MonkeyPatch):
    """A judge that answers badly once in every three calls."""
    with OpenAIServer(default_reply=GOOD) as server:
        server.script(*[BAD, GOOD, GOOD] * 3)
        monkeypatch.setenv("JUDGE", server.base_url)
        project.rows("cases.jsonl", [{"id": f"c{n}", "topic": "bread"} for n in range(6)])
        project.write_eval(EVAL)
        yield server


def test_a_judge_that_answers_badly_once_in_three_calls_is_asked_again(
    project: Project, judge_server: OpenAIServer
) -> None:
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    assert [r.passed for r in sorted(result.rows, key=lambda r: r.key)] == [True] * 6
    # calls 1, 4, 7 were unreadable: cases c0, c2, c4 were asked again once each
    retried = {r.case: r.scores["helpful"].retries for r in result.rows}
    assert retried == {"c0": 1, "c1": 0, "c2": 1, "c3": 0, "c4": 1, "c5": 0}
    helpful = result.summary.scorers["helpful"]
    assert (helpful.errors, helpful.retries, helpful.mean_score) == (0, 3, 4.0)
    assert len(judge_server.requests) == 9
    again = judge_server.requests[1].body["messages"][-1]["content"]
    assert "Your previous answer could not be read" in again
    assert "3 unreadable judge answers asked again" in result.summary.totals_line()


def test_with_no_retries_the_same_judge_leaves_two_errors_from_the_command_line(
    project: Project, judge_server: OpenAIServer
) -> None:
    project.write_eval(EVAL + "      retries: 0\n")
    done = run_awf("eval", "t.eval.yaml", "--json", "--storage", str(project.store.root),
                   cwd=project.root)  # fmt: skip
    assert done.returncode == 3
    data = json.loads(done.stdout)
    helpful = data["summary"]["scorers"]["helpful"]
    assert (helpful["errors"], helpful["retries"], helpful["passed"]) == (2, 0, 4)
    assert len(judge_server.requests) == 6


CRITERIA_EVAL = """\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
scorers:
  - name: manners
    judge:
      provider: scripted
      criteria: [The assistant greets the user, The assistant names the topic, It is short]
      options:
        replies:
          - "Sure! Here is my verdict: {\\"criteria\\": [oops"
          - |
            ```json
            {"criteria": [
              {"criterion": 1, "pass": false, "reason": "no greeting at all"},
              {"criterion": 2, "pass": "pass", "reason": "it says bread"},
              {"criterion": 3, "pass": true, "reason": "one line"}]}
            ```
"""


def test_a_criteria_judge_says_which_criteria_failed_and_why(project: Project) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}])
    project.write_eval(CRITERIA_EVAL)
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    value = result.rows[0].scores["manners"]
    assert (value.passed, value.score, value.retries) == (False, pytest.approx(2 / 3), 1)
    assert value.detail == 'failed: "The assistant greets the user": no greeting at all'
    assert [(c["passed"], c["reason"]) for c in value.criteria] == [
        (False, "no greeting at all"), (True, "it says bread"), (True, "one line")
    ]  # fmt: skip
    done = run_awf("eval-show", result.eval_id, "--json", "--storage", str(project.store.root),
                   cwd=project.root)  # fmt: skip
    shown = json.loads(done.stdout)["rows"][0]["scores"]["manners"]
    assert shown["criteria"][0] == {
        "criterion": "The assistant greets the user", "passed": False,
        "reason": "no greeting at all",
    }  # fmt: skip


def test_a_criteria_judge_needs_its_criteria_answered() -> None:
    criteria = ["greets", "short"]
    assert criteria_verdict('{"criteria": [{"criterion": 1, "pass": true}]}', criteria) == (
        None, 'the judge gave no verdict on criterion 2 ("short")'
    )  # fmt: skip
    assert criteria_verdict("no json here", criteria)[1] == (
        "the judge's answer holds no JSON object with a verdict per criterion"
    )
    verdicts, _ = criteria_verdict('{"greets": "pass", "short": {"pass": "no"}}', criteria)
    assert [v["passed"] for v in verdicts or []] == [True, False]


def test_samples_give_the_mean_and_their_agreement(project: Project) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}])
    project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: stars
            judge:
              provider: scripted
              options: {replies: ["SCORE: 4", "SCORE: 2", "SCORE: 5"]}
              prompt: "Rate {{.transcript}}"
              pass: ">= 3"
              samples: 3
        """
    )
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    value = result.rows[0].scores["stars"]
    assert (value.passed, value.score) == (True, pytest.approx(11 / 3))
    assert [s["passed"] for s in value.samples] == [True, False, True]
    stars = result.summary.scorers["stars"]
    assert stars.agreement == pytest.approx(1 / 3)  # one agreeing pair of three


def test_fleiss_kappa_on_known_data() -> None:
    # perfect agreement with variation between rows: kappa 1
    assert agreement([[True, True], [False, False]]) == (1.0, 1.0)
    # agreement no better than chance: 2 raters, p(yes) = 0.5, observed 0.5 -> kappa 0
    assert agreement([[True, False], [True, True], [False, False], [False, True]]) == (0.5, 0.0)
    # no variation at all: kappa undefined
    assert agreement([[True, True, True]]) == (1.0, None)


def test_several_judges_give_the_majority_the_mean_and_their_agreement(project: Project) -> None:
    # three cases; the three judges answer per case (one reply each per case, in order)
    project.rows("cases.jsonl", [{"id": f"c{n}", "topic": "bread"} for n in range(3)])

    def judge(scores: list[int]) -> str:
        replies = ", ".join(f'"SCORE: {s}"' for s in scores)
        return f"""\
      - provider: scripted
        options: {{replies: [{replies}]}}
        prompt: "Rate {{{{.transcript}}}}"
        pass: ">= 3"
"""

    project.write_eval(
        "workflow: wf.yaml\ndataset: cases.jsonl\n"
        'inputs: {topic: "{{.case.topic}}"}\nconcurrency: 1\n'
        "scorers:\n  - name: panel\n    judges:\n" + judge([4]) + judge([2]) + judge([5])
        # each judge's reply is per run: a scripted provider starts its list again per run
    )
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    value = result.rows[0].scores["panel"]
    assert (value.passed, value.score) == (True, pytest.approx(11 / 3))  # 2 of 3 pass
    assert value.detail == "judge 1: pass (4); judge 2: fail (2); judge 3: pass (5)"
    assert [s["passed"] for s in value.samples] == [True, False, True]
    panel = result.summary.scorers["panel"]
    assert panel.agreement == pytest.approx(1 / 3) and panel.kappa is not None
    assert "panel: samples agree 33%" in result.summary.totals_line()


def test_judges_needs_two_or_more(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "x"}])
    project.write_eval(
        "workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: x}\nscorers:\n"
        "  - {name: p, judges: [{prompt: rate, pass: '>= 3', provider: scripted}]}\n"
    )
    done = run_awf("validate", "t.eval.yaml", cwd=project.root)
    assert done.returncode != 0
    assert 'scorer "p": judges lists two or more' in done.stdout + done.stderr
