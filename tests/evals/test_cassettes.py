"""A cassette per (case, epoch) against a real (local, fake) OpenAI-compatible server: the
agent, the simulated user and the judge all on it. `--record` then `--replay` gives the
same rows with no provider constructed; a missing cassette is an error naming the case;
`--record-missing` records only what is missing; a replay that stops early is a mismatch.
Also: an erroring judge server is an error in that cell."""

from __future__ import annotations

import pytest

import awf_nb.providers
from awf_nb.errors import UserError
from awf_nb.evals.api import prepare_eval, prepare_resume
from awf_nb.evals.results import EvalResult
from tests.support.eval_project import SERVED_WORKFLOW as WORKFLOW
from tests.support.eval_project import Project
from tests.support.eval_project import served_eval_text as eval_text
from tests.support.openai_server import OpenAIServer, Reply


def comparable(result: EvalResult) -> list[dict[str, object]]:
    rows = []
    for row in sorted(result.rows, key=lambda r: r.key):
        data = row.as_dict()
        for varying in ("run_id", "seconds", "seed"):  # the seed: drawn per eval
            data.pop(varying)
        rows.append(data)
    return rows


@pytest.fixture
def served(project: Project, monkeypatch: pytest.MonkeyPatch):
    with OpenAIServer(default_reply=Reply.text("I give it 3 stars.\nSCORE: 3")) as server:
        monkeypatch.setenv("SERVER", server.base_url)
        project.write("wf2.yaml", WORKFLOW)
        project.rows(
            "cases.jsonl", [{"id": "bread", "topic": "bread"}, {"id": "jam", "topic": "jam"}]
        )
        yield server


async def evaluate(project: Project, text: str, **kwargs: object) -> EvalResult:
    path = project.write_eval(text)
    return await prepare_eval(path, storage=project.store, **kwargs).execute()  # type: ignore[arg-type]


async def test_record_then_replay_gives_the_same_rows_with_no_provider_made(
    project: Project, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = eval_text(served.base_url)
    recorded = await evaluate(project, text, record="cassettes")
    assert recorded.status == "completed" and len(recorded.rows) == 4
    row = recorded.rows[0]
    assert row.scores["stars"].score == 3.0 and row.passed is True and row.turns == 2
    files = sorted(p.name for p in (project.root / "cassettes").iterdir())
    assert files == [f"{c}-{e}.cassette.jsonl" for c in ("bread", "jam") for e in (1, 2)]
    tape = (project.root / "cassettes" / "bread-1.cassette.jsonl").read_text()
    assert '"speaker":"user (simulated)"' in tape and '"speaker":"judge"' in tape
    assert "sk-test-secret-123456" not in tape  # masked like everywhere else
    requests = len(served.requests)

    def no_provider(name: str) -> object:
        raise AssertionError(f"a replay constructed provider {name}")

    monkeypatch.setattr(awf_nb.providers, "create_provider", no_provider)
    replayed = await evaluate(project, text, replay="cassettes")
    assert len(served.requests) == requests  # the server was not asked anything
    assert comparable(replayed) == comparable(recorded)


async def test_a_missing_cassette_is_an_error_naming_the_case_and_record_missing_fills_it(
    project: Project, served: OpenAIServer
) -> None:
    text = eval_text(served.base_url)
    await evaluate(project, text, record="cassettes")
    (project.root / "cassettes" / "jam-2.cassette.jsonl").unlink()
    before = sorted(project.store.list_run_ids())
    with pytest.raises(
        UserError, match=r'no cassette for case "jam" epoch 2: .*jam-2.cassette.jsonl is missing'
    ):
        await evaluate(project, text, replay="cassettes")
    assert sorted(project.store.list_run_ids()) == before  # nothing ran
    requests = len(served.requests)
    filled = await evaluate(project, text, record_missing="cassettes")
    assert len(filled.rows) == 4
    assert (project.root / "cassettes" / "jam-2.cassette.jsonl").is_file()
    # one run's requests only: 2 agent replies (max_turns 2), the user's 1 message, 1 judge
    assert len(served.requests) - requests == 4


async def test_a_replay_that_uses_fewer_recorded_turns_is_a_mismatch(
    project: Project, served: OpenAIServer
) -> None:
    await evaluate(project, eval_text(served.base_url, max_turns=2), record="cassettes")
    shorter = eval_text(served.base_url, max_turns=1)
    result = await evaluate(project, shorter, replay="cassettes")
    for row in result.rows:
        assert row.outcome == "error" and row.error_kind == "cassette"
        assert "fewer recorded turns than the cassette holds" in row.error


async def test_a_replay_whose_prompt_changed_names_the_prompt_in_its_row(
    project: Project, served: OpenAIServer
) -> None:
    text = eval_text(served.base_url)
    await evaluate(project, text, record="cassettes")
    project.write("wf2.yaml", WORKFLOW.replace("Help me with", "Teach me"))
    result = await evaluate(project, text, replay="cassettes")
    for row in result.rows:
        assert row.outcome == "error" and row.error_kind == "cassette"
        # the real cause, as `awf status` shows it, not the turns it left unused
        assert "the prompt differs" in row.error, row.error
        assert "fewer recorded turns" not in row.error


async def test_an_erroring_judge_server_is_an_error_in_its_cell(
    project: Project, served: OpenAIServer
) -> None:
    with OpenAIServer(default_reply=Reply.error(400, "judge model not loaded")) as judge:
        text = eval_text(served.base_url, judge_url=judge.base_url)
        result = await evaluate(project, text, epochs=1)
    for row in result.rows:
        assert row.scores["stars"].passed is None
        assert "judge model not loaded" in row.scores["stars"].error
        assert row.scores["long"].passed is True
        assert row.outcome == "error" and row.error_kind == "scorer"


async def test_an_eval_with_a_judge_resumes(project: Project, served: OpenAIServer) -> None:
    # the judge's `pass: ">= 3"` is kept in the eval's folder and read back on resume
    first = await evaluate(project, eval_text(served.base_url))
    results = project.store.root / "evals" / first.eval_id / "results.jsonl"
    results.write_text(results.read_text().splitlines()[0] + "\n")
    resumed = await prepare_resume(first.eval_id, storage=project.store).execute()
    assert resumed.status == "completed" and len(resumed.rows) == 4
    assert all(row.scores["stars"].passed for row in resumed.rows)


async def test_the_user_s_and_the_judge_s_provider_and_options_are_templates(
    project: Project, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a step's options are: the server and its key from the environment, the model from
    # the case; the key never shows.
    monkeypatch.setenv("USER_KEY", "sk-user-key-000111222")
    monkeypatch.setenv("JUDGE_KEY", "sk-judge-key-333444555")
    monkeypatch.setenv("JUDGE_PROVIDER", "openai_compatible")
    text = """\
workflow: wf2.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
user:
  provider: "{{.env.JUDGE_PROVIDER}}"
  options: {base_url: "{{.env.SERVER}}", model: "user-{{.case.id}}", api_key: "{{.env.USER_KEY}}"}
  persona: "You want {{.case.topic}}"
  max_turns: 2
scorers:
  - name: stars
    judge:
      provider: "{{.env.JUDGE_PROVIDER}}"
      options:
        base_url: "{{.env.SERVER}}"
        model: "judge-{{.case.id}}-{{.status}}"
        api_key: "{{.env.JUDGE_KEY}}"
        stop: ["{{.case.topic}}!"]
      prompt: "How many stars? {{.transcript}}"
      pass: ">= 3"
"""
    result = await evaluate(project, text, epochs=1)
    assert [row.outcome for row in result.rows] == ["pass", "pass"], result.rows
    sent = {
        (r.body["model"], r.headers.get("authorization"), str(r.body.get("stop")))
        for r in served.requests
    }
    assert ("user-bread", "Bearer sk-user-key-000111222", "None") in sent
    assert ("judge-jam-completed", "Bearer sk-judge-key-333444555", "['jam!']") in sent
    assert {model for model, _key, _stop in sent} == {
        "m", "user-bread", "user-jam", "judge-bread-completed", "judge-jam-completed"
    }  # fmt: skip
    stored = b"".join(p.read_bytes() for p in project.store.root.rglob("*") if p.is_file())
    assert b"sk-user-key" not in stored and b"sk-judge-key" not in stored


async def test_an_options_template_that_does_not_render_is_an_error_of_its_row(
    project: Project, served: OpenAIServer
) -> None:
    text = eval_text(served.base_url).replace(
        "model: m}\n  persona", 'model: "{{.case.nope}}"}\n  persona'
    )
    assert "{{.case.nope}}" in text
    result = await evaluate(project, text, epochs=1)
    for row in result.rows:
        assert row.outcome == "error" and row.error_kind == "setup"
        assert "user.options.model" in row.error and "nope" in row.error


async def test_a_command_scorer_pass_k_and_the_eval_s_limits_against_the_server(
    project: Project, served: OpenAIServer
) -> None:
    """Known outcomes on the server: the agent says "yes", "no", "yes" in the three epochs
    of case `bread` (one at a time, so in that order); case `jam`'s simulated user would
    go on, but the eval's limits stop its run at the second reply."""
    served.script(
        Reply.text("yes, with yeast"), Reply.text("no idea"), Reply.text("yes again"),
        Reply.text("jam reply 1"), Reply.text("go on"), Reply.text("jam reply 2"),
    )  # fmt: skip
    served_eval = f"""\
workflow: wf2.yaml
dataset: cases.jsonl
inputs: {{topic: "{{{{.case.topic}}}}"}}
user:
  provider: openai_compatible
  options: {{base_url: "{served.base_url}", model: m}}
  persona: "You want {{{{.case.topic}}}}"
  max_turns: 1
scorers:
  - name: says_yes
    command: grep -q '"yes'
epochs: 3
concurrency: 1
"""
    result = await evaluate(project, served_eval, limit=1)
    assert [row.scores["says_yes"].passed for row in result.rows] == [True, False, True]
    assert result.summary.scorers["says_yes"].pass_hat == {1: 2 / 3, 2: 1 / 3, 3: 0.0}

    limited = served_eval.replace("max_turns: 1", "max_turns: 3").replace(
        "epochs: 3", "epochs: 1\nlimits: {max_agent_turns: 1}"
    )
    project.rows("cases.jsonl", [{"id": "jam", "topic": "jam"}])
    (row,) = (await evaluate(project, limited)).rows
    assert (row.status, row.error_kind, row.turns) == ("failed", "limit", 1)
    assert "limits.max_agent_turns (1) reached" in row.error
