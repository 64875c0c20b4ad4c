"""Eval files: located errors with did-you-mean, checks that need the workflow and the
dataset, and `awf validate` on eval files."""

from __future__ import annotations

import pytest

from awf_nb.cli import main
from awf_nb.errors import DefinitionError, UserError
from awf_nb.evals.loader import is_eval_file, load_eval
from tests.support.eval_project import Project


def problems(project: Project, text: str) -> list[str]:
    path = project.write_eval(text)
    with pytest.raises(DefinitionError) as caught:
        load_eval(path)
    return [str(p) for p in caught.value.problems]


def test_a_valid_eval_file_loads_with_its_workflow_and_cases(project: Project) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}, {"topic": "yeast"}])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: ended
            condition: 'stopped_by == "user_exit"'
          - name: helpful
            judge: {provider: scripted, prompt: "rate {{.transcript}}", pass: ">= 4"}
          - name: grader
            command: python grade.py
            timeout: 5s
        epochs: 3
        """
    )
    spec = load_eval(path)
    assert spec.workflow.name == "chatty"
    assert [c.id for c in spec.cases] == ["a", "2"]  # the id column, else the row number
    assert [s.kind for s in spec.file.scorers] == ["condition", "judge", "command"]
    assert spec.file.scorers[1].judge.pass_.passes(4) and not spec.file.scorers[
        1
    ].judge.pass_.passes(3.9)
    assert spec.file.scorers[2].command_timeout == 5


def test_unknown_keys_are_located_errors_with_a_did_you_mean(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(
        project,
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: x}
        scorer:
          - name: a
        scorers:
          - name: b
            condtion: 'status == "completed"'
        """,
    )
    assert 't.eval.yaml:4:1: error: scorer: unknown key "scorer" (did you mean "scorers"?)' in found
    assert any(
        p.startswith("t.eval.yaml:8:5: error: scorers[0].condtion")
        and 'did you mean "condition"' in p
        for p in found
    ), found


def test_checks_that_need_the_model_report_every_mistake_where_it_is(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(
        project,
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs:
          topic: "{{.case.topic}}"
          topc: x
        scorers:
          - name: ended
            condition: 'stopped_by == "user_exit" and'
          - name: ended
            command: "true"
          - name: j
            judge:
              provider: scriptd
              prompt: "{{.case.topic"
              pass: ">= 4"
        """,
    )
    text = "\n".join(found)
    assert (
        't.eval.yaml:5:3: error: inputs.topc: workflow chatty has no input "topc" (did you mean "topic"?)'
        in text
    )
    assert (
        "t.eval.yaml:8:5: error: scorers[0].condition: condition: unexpected end of expression"
        in text
    )
    assert 't.eval.yaml:9:5: error: scorers[1].name: scorer name "ended" is used twice' in text
    assert 't.eval.yaml:13:7: error: scorers[2].judge.provider: unknown provider "scriptd"' in text
    assert 'did you mean "scripted"' in text
    assert "t.eval.yaml:14:7: error: scorers[2].judge.prompt: template:" in text


def test_a_bad_template_in_the_user_s_or_judge_s_options_is_located(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(
        project,
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: x}
        user:
          persona: p
          provider: "{{.env.P"
          options: {base_url: "{{.env.URL", stop: [a, "{{.case.x"]}
        scorers:
          - name: j
            judge:
              prompt: p
              pass: ">= 1"
              options: {headers: {X-Key: "{{.env.KEY"}}
        """,
    )
    text = "\n".join(found)
    assert "t.eval.yaml:6:3: error: user.provider: template:" in text
    assert "t.eval.yaml:7:13: error: user.options.base_url: template:" in text
    assert "t.eval.yaml:7:47: error: user.options.stop[1]: template:" in text
    assert "t.eval.yaml:13:27: error: scorers[0].judge.options.headers.X-Key: template:" in text


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        (
            "{name: x}",
            'scorer "x" needs exactly one of condition, judge, judges, command, tools (got none)',
        ),
        ("{name: x, condition: 'true', command: 'true'}", "(got condition and command)"),
        ("{name: run_id, condition: 'true'}", "already a column of every result row"),
        ("{name: '1x', condition: 'true'}", "must start with a letter"),
        ("{name: x, judge: {prompt: p, pass: '4'}}", 'pass must be a comparison such as ">= 4"'),
        ("{name: x, condition: 'true', timeout: 3}", "timeout applies to a command scorer"),
    ],
)
def test_bad_scorers(project: Project, scorer: str, message: str) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(
        project,
        f"workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {{topic: x}}\nscorers: [{scorer}]\n",
    )
    assert any(message in p and p.startswith("t.eval.yaml:4:") for p in found), found


def test_a_required_workflow_input_must_be_given(project: Project) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(project, "workflow: wf.yaml\ndataset: cases.jsonl\n")
    assert any('needs input "topic": give it under inputs:' in p for p in found), found


def test_a_missing_workflow_and_a_bad_dataset_are_reported_with_their_lines(
    project: Project,
) -> None:
    project.write("cases.jsonl", '{"topic": "a"}\nnot json\n{"id": "x"}\n{"id": "x"}\n')
    found = problems(project, "workflow: nope.yaml\ndataset: cases.jsonl\n")
    text = "\n".join(found)
    assert 't.eval.yaml:1:1: error: workflow nope.yaml: workflow "nope.yaml" not found' in text
    assert "cases.jsonl:2: error: line 2: not JSON" in text
    assert 'cases.jsonl:4: error: line 4: case id "x" is used twice (first at line 3)' in text


def test_an_invalid_workflow_shows_its_own_located_problems(project: Project) -> None:
    project.write("bad.yaml", "name: bad\nstates:\n  initial: nowhere\n")
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(project, "workflow: bad.yaml\ndataset: cases.jsonl\n")
    assert any(
        p.startswith("t.eval.yaml:1:1: error: workflow bad.yaml is invalid (its problems follow)")
        for p in found
    )
    assert any(p.startswith("bad.yaml:") for p in found), found


def test_the_files_own_errors_do_not_hide_the_workflow_and_dataset_problems(
    project: Project,
) -> None:
    project.write("bad.yaml", "name: bad\nstates:\n  initial: nowhere\n")
    found = problems(project, "workflow: bad.yaml\ndataset: missing.jsonl\nepochs: 0\n")
    assert any(": error: epochs:" in p for p in found), found
    assert any("workflow bad.yaml is invalid" in p for p in found), found
    assert any(p.startswith("bad.yaml:") for p in found), found
    assert any("missing.jsonl" in p for p in found), found


def test_the_files_own_errors_do_not_hide_its_scorer_and_input_checks(
    project: Project,
) -> None:
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(
        project,
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        epochs: 0
        inputs: {topic: x, tone: y}
        scorers:
          - name: broken
            timeout: forever
          - name: ended
            condition: 'stopped_by =='
          - name: ended
            condition: 'no_such_name == 1'
        """,
    )
    assert any(": error: epochs:" in p for p in found), found
    assert any(": error: scorers[0].timeout:" in p for p in found), found
    # the scorers that can be read are checked, each named by its own index
    assert any(": error: scorers[1].condition: condition:" in p for p in found), found
    assert any(": error: scorers[2].condition:" in p and "no_such_name" in p for p in found)
    assert any('scorers[2].name: scorer name "ended" is used twice' in p for p in found), found
    # and the inputs against the workflow
    assert any('inputs.tone: workflow chatty has no input "tone"' in p for p in found), found


def test_a_required_key_that_cannot_be_read_does_not_hide_the_scorer_checks(
    project: Project,
) -> None:
    found = problems(
        project,
        """\
        workflow: wf.yaml
        dataset: {path: cases.jsonl, max_rows: 0}
        scorers:
          - {name: a, condition: 'stopped_by =='}
        """,
    )
    assert any(": error: dataset.max_rows:" in p for p in found), found
    assert any(": error: scorers[0].condition: condition:" in p for p in found), found
    assert not any("cases.jsonl" in p and "not found" in p for p in found), found


def test_an_unknown_provider_does_not_hide_the_input_checks(project: Project) -> None:
    project.write("wf3.yaml", CHAT_WITH_UNKNOWN_PROVIDER)
    project.rows("cases.jsonl", [{"topic": "bread"}])
    found = problems(project, "workflow: wf3.yaml\ndataset: cases.jsonl\n")
    assert any("no-such-provider" in p for p in found), found
    assert any("topic" in p for p in found), found  # the required input nobody gives


CHAT_WITH_UNKNOWN_PROVIDER = """\
name: chatty3
inputs: [{name: topic, required: true}]
states:
  initial: chat
  chat: {type: agent, provider: no-such-provider, prompt: hi, on_success: done}
  done: {type: terminal}
"""


def test_a_missing_eval_file_is_a_user_error(project: Project) -> None:
    with pytest.raises(UserError, match=r"eval file nowhere\.eval\.yaml not found"):
        load_eval("nowhere.eval.yaml", cwd=project.root)


def test_eval_files_are_told_by_suffix_or_by_their_keys() -> None:
    assert is_eval_file("x/bread.eval.yaml")
    assert not is_eval_file("x/bread.yaml")
    assert is_eval_file("x/bread.yaml", "workflow: a.yaml\ndataset: b.jsonl\n")
    assert not is_eval_file("x/bread.yaml", "name: x\nstates: {}\n")


def test_awf_validate_accepts_eval_files(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project.root)
    project.rows("cases.jsonl", [{"topic": "bread"}])
    project.write_eval("workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: x}\n")
    project.write("plain.yaml", "workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topc: x}\n")
    assert main(["validate", "t.eval.yaml", "wf.yaml"]) == 0
    assert "t.eval.yaml: valid" in capsys.readouterr().out
    assert main(["validate", "plain.yaml"]) == 2  # told by its keys
    out = capsys.readouterr().out
    assert 'plain.yaml:3:10: error: inputs.topc: workflow chatty has no input "topc"' in out
    assert "plain.yaml: invalid (2 errors, 1 warning)" in out  # the warning: cases without replies


def test_a_conversation_nobody_answers_in_some_cases_is_a_warning(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `user:`, and cases without replies: the conversation ends after its first reply
    in those cases. Said at validation, naming the cases and the step."""
    monkeypatch.chdir(project.root)
    project.rows(
        "cases.jsonl",
        [{"id": "a", "topic": "bread"}, {"id": "b", "topic": "jam", "replies": ["more", ""]}],
    )
    project.write_eval("workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: x}\n")
    assert main(["validate", "t.eval.yaml"]) == 0
    out = capsys.readouterr().out
    assert "warning: dataset: 1 case(s) ('a') have no replies and the eval has no user" in out
    assert "the conversation of step chat ends after its first reply" in out
    project.write_eval(
        "workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: x}\n"
        "user: {persona: a baker, provider: scripted, options: {replies: [hi]}}\n",
        "u.eval.yaml",
    )
    assert main(["validate", "u.eval.yaml"]) == 0
    assert "no replies" not in capsys.readouterr().out
