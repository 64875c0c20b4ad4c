"""ADR-005's remaining ideas, with scripted parties: a cap of visits per step
(`limits.max_visits`), a script as a conversation partner (`conversation.with.command`),
every visit of a step kept (`{{.states.NAME.Visits}}`), and the run's conversation as data
(`RunResult.exchange`, `completion_reason`, `awf status --json`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from awf_nb.engine.events import RunWarning, UserMessage
from awf_nb.engine.state import RunState
from awf_nb.errors import DefinitionError
from awf_nb.runs import prepare_run
from awf_nb.workflow.loader import load_text
from tests.support.cli import run_awf
from tests.support.events import Collect
from tests.support.processes import process_alive
from tests.support.waiting import until

CYCLE = """
name: cycle
limits: {{max_visits: {{write: {cap}}}}}
states:
  initial: write
  write:
    type: agent
    provider: scripted
    prompt: draft
    options: {{replies: [d1, d2, d3, d4, d5]}}
    on_success: review
    {on_failure}
  review:
    type: agent
    provider: scripted
    prompt: "review {{{{.states.write.Output}}}}"
    options: {{replies: [r1, r2, r3, r4, r5]}}
    on_success: write
  best:
    type: step
    command: echo "best of {{{{len .states.write.Visits}}}}"
    on_success: done
  done: {{type: terminal, message: "{{{{.states.best.Output}}}}"}}
"""


def _cycle(cap: int, on_failure: str = "") -> str:
    return CYCLE.format(cap=cap, on_failure=f"on_failure: {on_failure}" if on_failure else "")


# --- limits.max_visits -------------------------------------------------------------------------


async def test_a_step_past_its_max_visits_ends_the_run_naming_it(run_yaml):
    result = await run_yaml(_cycle(2))
    assert not result.ok
    assert result.error == "run stopped at step write: limits.max_visits (2) reached"
    assert result.completion_reason == "limit"
    assert result.exit_code == 3
    assert result.state.visits == {"write": 2, "review": 2}
    assert result.outputs["write"] == "d2"  # the last visit's state is kept


async def test_a_step_past_its_max_visits_goes_to_its_on_failure(run_yaml):
    sink = Collect()
    result = await run_yaml(_cycle(3, "best"), sink=sink)
    assert result.ok, result.error
    assert result.message == "best of 3"
    assert result.completion_reason == "terminal"
    warned = [e.message for e in sink.of(RunWarning)]
    assert "step write: limits.max_visits (3) reached; going to best (its on_failure)" in warned


async def test_an_inline_on_failure_ends_the_run_with_its_message(run_yaml):
    text = _cycle(1).replace(
        "on_success: review\n",
        'on_success: review\n    on_failure: {message: "enough", status: 4}\n',
        1,
    )
    result = await run_yaml(text)
    assert (result.ok, result.error, result.exit_code) == (False, "enough", 4)


def test_max_visits_names_existing_steps_and_positive_counts() -> None:
    with pytest.raises(DefinitionError) as caught:
        load_text(_cycle(2).replace("{write: 2}", "{wrte: 2, review: 0}"))
    messages = [(p.path, p.message, p.hint) for p in caught.value.problems]
    assert any("limits.max_visits.review must be >= 1, got 0" in m for _, m, _ in messages)
    assert not any("wrte" in m for _, m, _ in messages)  # model error first: the file stops
    with pytest.raises(DefinitionError) as caught:
        load_text(_cycle(2).replace("{write: 2}", "{wrte: 2}"))
    [problem] = [p for p in caught.value.problems if p.severity == "error"]
    assert problem.message == "limits.max_visits references unknown step 'wrte'"
    assert problem.hint == 'did you mean "write"?'


def test_visit_counts_are_in_the_state_file() -> None:
    state = RunState(run_id="r", workflow_name="w", visits={"write": 2})
    assert RunState.from_json(state.to_json()).visits == {"write": 2}


# --- {{.states.NAME.Visits}} ----------------------------------------------------------------


async def test_a_writer_is_given_every_earlier_review(run_yaml):
    text = """
name: reviews
limits: {max_visits: {review: 3}}
states:
  initial: review
  review:
    type: agent
    provider: scripted
    prompt: review the draft
    options: {replies: [fix one, fix two, fix three]}
    on_success: write
    on_failure: done
  write:
    type: agent
    provider: scripted
    prompt: |
      draft{{range .states.review.Visits}}
      - review {{.Visit}}: {{.Output}} ({{.TokensUsed}} tokens, {{.Status}}){{end}}
    on_success: review
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.ok, result.error
    write, review = result.steps["write"], result.steps["review"]
    assert (write.visit, review.visit) == (3, 3)
    tokens = [v.tokens_used for v in review.visits] + [review.tokens_used]
    assert write.output.splitlines() == [
        "draft",
        f"- review 1: fix one ({tokens[0]} tokens, completed)",
        f"- review 2: fix two ({tokens[1]} tokens, completed)",
        f"- review 3: fix three ({tokens[2]} tokens, completed)",
    ]
    assert [v.number for v in write.visits] == [1, 2]
    assert write.visits[0].output.splitlines() == write.output.splitlines()[:2]


async def test_visits_keep_the_conversations_stopped_by(run_yaml):
    text = """
name: chats
limits: {max_visits: {chat: 2}}
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "go"
    options: {replies: [a, b, c, d]}
    conversation:
      with: {name: judge, replies: [more, stop]}
      until: 'message == "stop"'
      max_turns: 1
    on_success: chat
    on_failure: report
  report:
    type: step
    command: echo '{{range .states.chat.Visits}}{{.Visit}}:{{.StoppedBy}} {{end}}'
    on_success: done
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.ok, result.error
    assert result.outputs["report"] == "1:max_turns 2:max_turns "


async def test_visits_kept_is_bounded(run_yaml):
    text = """
name: many
limits: {max_visits: {tick: 5}, visits_kept: 2}
states:
  initial: tick
  tick:
    type: step
    command: 'n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo $n'
    on_success: tick
    on_failure: show
  show: {type: step, command: "echo {{range .states.tick.Visits}}{{.Output}}{{end}}", on_success: done}
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.ok, result.error
    assert result.outputs["show"] == "45"  # earlier visit 4 and the last one, 5


# --- conversation.with: {command: …} ----------------------------------------------------------

JUDGE = textwrap.dedent(
    """\
    import json, os, sys
    doc = json.load(sys.stdin)
    with open(os.environ["LOG"], "a") as log:
        log.write(json.dumps({"turn": doc["turn"], "step": doc["step"], "reply": doc["reply"],
                              "messages": doc["messages"], "env_turn": os.environ["AWF_TURN"],
                              "topic": os.environ.get("topic")}) + "\\n")
    print("APPROVED" if "3" in doc["reply"] else "revise " + doc["reply"])
    """
)


def _judged(command: str, extra: str = "", until: str = 'message == "APPROVED"') -> str:
    return f"""
name: judged
inputs: [{{name: topic, default: snow}}]
states:
  initial: draft
  draft:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "a haiku about {{{{.inputs.topic}}}}"
    options: {{replies: [draft 1, draft 2, draft 3, draft 4]}}
    conversation:
      with: {{name: judge, command: {json.dumps(command)}{extra}}}
      until: '{until}'
      max_turns: 5
    on_success: done
  done: {{type: terminal}}
"""


async def test_a_command_partner_answers_from_stdin_json(run_yaml, workdir: Path):
    (workdir / "judge.py").write_text(JUDGE)
    log = workdir / "log.jsonl"
    env = {**os.environ, "LOG": str(log)}
    sink = Collect()
    result = await run_yaml(_judged(f"{sys.executable} judge.py"), env=env, sink=sink)
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "condition" and conv.total_turns == 3
    said = [(t.role, t.speaker, t.content) for t in conv.turns]
    assert said == [
        ("user", "", "a haiku about snow"),
        ("assistant", "", "draft 1"),
        ("user", "judge", "revise draft 1"),
        ("assistant", "", "draft 2"),
        ("user", "judge", "revise draft 2"),
        ("assistant", "", "draft 3"),
        ("user", "judge", "APPROVED"),
    ]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["turn"], c["env_turn"], c["reply"]) for c in calls] == [
        (1, "1", "draft 1"), (2, "2", "draft 2"), (3, "3", "draft 3"),
    ]  # fmt: skip
    assert calls[1]["messages"] == [
        {"role": "user", "speaker": "", "content": "a haiku about snow"},
        {"role": "assistant", "speaker": "", "content": "draft 1"},
        {"role": "user", "speaker": "judge", "content": "revise draft 1"},
        {"role": "assistant", "speaker": "", "content": "draft 2"},
    ]
    assert calls[0]["topic"] == "snow" and calls[0]["step"] == "draft"
    assert [e.speaker for e in sink.of(UserMessage) if e.speaker] == ["judge"] * 3


COMPARED = """
name: compared
states:
  initial: judged
  judged:
    type: agent
    provider: scripted
    mode: conversation
    prompt: write
    options: {replies: [draft 1, draft 2, draft 3]}
    conversation:
      with: {name: judge, command: 'echo "reply $AWF_TURN"'}
      max_turns: 3
    on_success: reviewed
  reviewed:
    type: agent
    provider: scripted
    mode: conversation
    prompt: write
    options: {replies: [draft 1, draft 2, draft 3]}
    conversation:
      with:
        name: reviewer
        provider: scripted
        prompt: "reply {{.turn}}"
        options: {replies: [ok, ok, ok]}
      max_turns: 3
    on_success: done
  done: {type: terminal}
"""


async def test_a_command_partner_numbers_a_reply_as_turn_templates_and_until_do(run_yaml):
    result = await run_yaml(COMPARED)
    assert result.ok, result.error
    judged = result.steps["judged"].conversation.turns
    reviewed = result.steps["reviewed"].conversation.turns
    by_command = [t.content for t in judged if t.speaker == "judge"]
    by_template = [t.sent for t in reviewed if t.speaker == "reviewer"]
    assert by_command == by_template == ["reply 1", "reply 2"]


async def test_a_failing_command_fails_the_step_with_its_stderr(run_yaml):
    result = await run_yaml(_judged("echo 'no judge here' >&2; exit 7"))
    assert not result.ok
    assert result.error == (
        "step draft: step draft: conversation.with.command: exit code 7: no judge here"
    ) or result.error.endswith("conversation.with.command: exit code 7: no judge here")
    assert result.steps["draft"].conversation.stopped_by == "error"


async def test_an_empty_answer_ends_the_exchange(run_yaml):
    result = await run_yaml(_judged("true"))
    assert result.ok, result.error
    conv = result.steps["draft"].conversation
    assert conv.stopped_by == "user_exit" and conv.total_turns == 1


async def test_a_command_that_prints_too_much_is_stopped(run_yaml):
    result = await run_yaml(_judged("yes filler", extra=", max_output_bytes: 1000"))
    assert not result.ok
    assert "printed more than 1000 bytes (conversation.with.max_output_bytes)" in result.error


async def test_a_slow_command_times_out(run_yaml):
    result = await run_yaml(_judged("sleep 30", extra=", timeout: 0.5"))
    assert not result.ok
    assert result.error.endswith("conversation.with.command timed out after 0.50 s")


async def test_a_secret_printed_by_the_command_is_masked(run_yaml):
    env = {**os.environ, "API_KEY_JUDGE": "sk-judge-secret-123"}
    result = await run_yaml(_judged('echo "key is $API_KEY_JUDGE"', until="turn >= 2"), env=env)
    assert result.ok, result.error
    said = [t.content for t in result.steps["draft"].conversation.turns if t.speaker]
    assert said == ["key is ***"]


async def test_ctrl_c_kills_the_command(store, workdir: Path):
    pid_file = workdir / "pid"
    script = f"if [ -e {pid_file} ]; then exit 0; fi; echo $$ > {pid_file}; exec sleep 60"
    runner = prepare_run(load_text(_judged(script)), storage=store, cwd=workdir).runner
    task = asyncio.create_task(runner.execute())
    await until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", "the judge ran")
    pid = int(pid_file.read_text())
    assert runner.interrupt() == "turn"
    state = await asyncio.wait_for(task, 30)
    await until(lambda: not process_alive(pid), "the judge was killed")
    # headless: the judge was asked again, and this time it ended the exchange
    assert state.status == "completed", state.error
    assert state.steps["draft"].conversation.stopped_by == "user_exit"


def test_a_command_partner_takes_no_agent_fields() -> None:
    with pytest.raises(DefinitionError, match="system_prompt only apply to an agent partner"):
        load_text(_judged("true", extra=", system_prompt: be nice"))
    with pytest.raises(DefinitionError, match="one of provider, replies or command"):
        load_text(_judged("true", extra=", provider: scripted"))


# --- the conversation as data -----------------------------------------------------------------


async def test_the_exchange_in_order_with_speakers_turns_tokens_and_times(run_yaml, workdir: Path):
    (workdir / "judge.py").write_text(JUDGE)
    env = {**os.environ, "LOG": str(workdir / "log.jsonl")}
    result = await run_yaml(_judged(f"{sys.executable} judge.py"), env=env)
    exchange = result.exchange
    assert [(e.step, e.turn, e.speaker, e.text) for e in exchange] == [
        ("draft", 1, "user", "a haiku about snow"),
        ("draft", 1, "agent", "draft 1"),
        ("draft", 2, "judge", "revise draft 1"),
        ("draft", 2, "agent", "draft 2"),
        ("draft", 3, "judge", "revise draft 2"),
        ("draft", 3, "agent", "draft 3"),
        # never sent (`until` stopped on it): the reply it answered, no "turn 4" of three
        ("draft", 3, "judge", "APPROVED"),
    ]
    replies = [e for e in exchange if e.speaker == "agent"]
    assert all(e.tokens > 0 and e.started_at is not None for e in replies)
    assert [e.started_at for e in exchange] == sorted(e.started_at for e in exchange)
    assert result.completion_reason == "terminal"


async def test_the_exchange_of_several_steps_and_visits(run_yaml):
    result = await run_yaml(_cycle(2, "best"))
    assert [(e.step, e.turn, e.speaker, e.text) for e in result.exchange] == [
        ("write", 1, "user", "draft"), ("write", 1, "agent", "d1"),
        ("review", 1, "user", "review d1"), ("review", 1, "agent", "r1"),
        ("write", 2, "user", "draft"), ("write", 2, "agent", "d2"),
        ("review", 2, "user", "review d2"), ("review", 2, "agent", "r2"),
    ]  # fmt: skip


async def test_without_storage_the_exchange_comes_from_the_conversations(workdir: Path):
    from awf_nb.api import arun

    (workdir / "judge.py").write_text(JUDGE)
    env = {**os.environ, "LOG": str(workdir / "log.jsonl")}
    result = await arun(_judged(f"{sys.executable} judge.py"), storage=False, cwd=workdir, env=env)
    assert [e.speaker for e in result.exchange] == ["user"] + ["agent", "judge"] * 3
    assert all(e.started_at is None for e in result.exchange)


async def test_awf_status_json_includes_the_exchange(run_yaml, store, workdir: Path):
    result = await run_yaml(_cycle(1))
    assert result.completion_reason == "limit"
    done = run_awf("status", result.run_id, "--json", "--storage", str(store.root), cwd=workdir)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["completion_reason"] == "limit"
    assert [(e["step"], e["speaker"], e["text"]) for e in data["exchange"]] == [
        ("write", "user", "draft"), ("write", "agent", "d1"),
        ("review", "user", "review d1"), ("review", "agent", "r1"),
    ]  # fmt: skip
    assert set(data["exchange"][1]) == {
        "step", "turn", "speaker", "role", "text", "tokens", "started_at", "duration",
        "interrupted",
    }  # fmt: skip


async def test_visits_and_their_counts_survive_a_resume(store, workdir: Path):
    """A run that failed on the third visit of `gate`, resumed there: `review`'s earlier
    visits are still listed, and its cap counts the visits made before the resume (it is
    reached at once: no fourth review)."""
    from awf_nb.runs import Resume, prepare_run

    text = """
name: resumable
limits: {max_visits: {review: 3}}
states:
  initial: review
  review:
    type: agent
    provider: scripted
    prompt: review
    options: {replies: [r1, r2, r3, r4]}
    on_success: gate
    on_failure: report
  gate:
    type: step
    command: 'if [ -e block ]; then exit 1; fi; n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; if [ $n = 1 ]; then touch block; fi'
    on_success: review
  report:
    type: step
    command: "echo '{{range .states.review.Visits}}{{.Output}} {{end}}'"
    on_success: done
  done: {type: terminal}
"""
    first = await prepare_run(load_text(text), storage=store, cwd=workdir).runner.execute()
    assert first.status == "failed" and first.current_step == "gate"
    assert first.visits == {"review": 3, "gate": 3}
    (workdir / "block").unlink()
    resumed = await prepare_run(Resume(first.run_id), storage=store, cwd=workdir).runner.execute()
    assert resumed.status == "completed", resumed.error
    assert resumed.visits == {"review": 3, "gate": 3, "report": 1}  # the resumed visit is not new
    assert resumed.steps["report"].output == "r1 r2 r3 "
    assert resumed.completion_reason == "terminal"
    assert resumed.steps["gate"].visit == 3


def test_the_json_schema_knows_max_visits_and_command_partners() -> None:
    import jsonschema
    import yaml

    from awf_nb.workflow.loader import json_schema

    schema = json_schema()
    document = yaml.safe_load(_judged("python3 judge.py", extra=", timeout: 30s"))
    document["limits"] = {"max_visits": {"draft": 2}, "visits_kept": 10}
    jsonschema.validate(document, schema)
    document["limits"]["max_visits"] = {"draft": "many"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


@pytest.mark.parametrize(
    "start",
    ["nohup sleep 300 >/dev/null 2>&1 &", "setsid sleep 300 >/dev/null 2>&1 &",
     "( sleep 300 >/dev/null 2>&1 & );"],
)  # fmt: skip
async def test_a_command_partners_background_jobs_end_with_it(run_yaml, workdir: Path, start):
    # The job writes its own pid, then sleeps: whatever way it left the group, it is stopped.
    job = start.replace("sleep 300", "sh -c 'echo $$ >> pids; exec sleep 300'")
    result = await run_yaml(_judged(f"{job} echo APPROVED"))
    assert result.ok, result.error
    await until(lambda: (workdir / "pids").exists(), "the job to start")
    pids = [int(pid) for pid in (workdir / "pids").read_text().split()]
    await until(lambda: not any(process_alive(pid) for pid in pids), "the job to be stopped")
