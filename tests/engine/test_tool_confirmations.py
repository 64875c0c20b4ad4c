"""Who answers a tool call's confirmation beyond the person at the prompt: an agent step in
a workflow run by a `call_workflow` step asks the person as any step does (and gets the
run's `--yes`); a cassette records the person's answers bound to their calls, replays a
refusal of the same call, and never approves a call by itself (a cassette is untrusted,
like a model)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.events import RunWarning
from awf_nb.engine.state import RunState
from awf_nb.runs import prepare_run
from awf_nb.runs.replies import ScriptedReader
from awf_nb.workflow.loader import load_text
from tests.support.events import Collect
from tests.support.tool_models import Confirming

CHILD_WITH_TOOLS = """
name: child
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Write it.
    tools: {builtin: [Write], confirm: [Write]}
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {path: from-child.txt, content: hi}}]
        - "Tried."
    on_success: done
  done: {type: terminal, message: "{{.states.work.Output}}"}
"""

PARENT = """
name: parent
states:
  initial: call
  call: {type: call_workflow, workflow: child, on_success: done}
  done: {type: terminal}
"""


@pytest.mark.parametrize("allowed", [True, False])
async def test_an_agent_in_a_called_workflow_asks_the_person(workdir: Path, allowed: bool):
    (workdir / "child.yaml").write_text(CHILD_WITH_TOOLS)
    reader = Confirming([allowed])
    runner = prepare_run(
        load_text(textwrap.dedent(PARENT), base_dir=workdir),
        cwd=workdir,
        reader=reader,
        storage=False,
    ).runner
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert reader.questions == ['Allow Write({"path": "from-child.txt", "content": "hi"})?']
    assert (workdir / "from-child.txt").exists() == allowed


@pytest.mark.parametrize(("yes", "written"), [(True, True), (False, False)])
async def test_a_called_workflow_with_nobody_to_ask_follows_the_runs_yes(
    workdir: Path, yes: bool, written: bool
):
    (workdir / "child.yaml").write_text(CHILD_WITH_TOOLS)
    runner = prepare_run(
        load_text(textwrap.dedent(PARENT), base_dir=workdir), cwd=workdir, yes=yes, storage=False
    ).runner
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert (workdir / "from-child.txt").exists() == written


async def test_a_conversation_in_a_called_workflow_talks_with_the_person(workdir: Path):
    (workdir / "chat.yaml").write_text(
        "name: chat\nstates:\n  initial: talk\n  talk:\n    type: agent\n"
        "    provider: scripted\n    mode: conversation\n    prompt: hi\n"
        '    options: {replies: ["hello", "tea it is"]}\n    on_success: done\n'
        '  done: {type: terminal, message: "{{.states.talk.Output}}"}\n'
    )
    parent = PARENT.replace("workflow: child", "workflow: chat")
    reader = ScriptedReader(["tea, please", ""])
    runner = prepare_run(
        load_text(textwrap.dedent(parent), base_dir=workdir),
        cwd=workdir,
        reader=reader,
        storage=False,
    ).runner
    state = await asyncio.wait_for(runner.execute(), 60)
    assert state.status == "completed", state.error
    assert state.steps["call"].output == "tea it is"
    assert reader.remaining == 0  # both lines were read by the called conversation
    assert reader.prompts == ["> ", "> "]


WRITER = """
name: writer
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: Write it.
    tools: {builtin: [Write], confirm: [Write]}
    options:
      replies:
        - tool_calls: [{name: Write, arguments: {path: out.txt, content: hi}}]
        - "Written."
    on_success: done
  done: {type: terminal}
"""


async def run_writer(workdir: Path, **kwargs: Any) -> RunState:
    workdir.mkdir(exist_ok=True)
    runner = prepare_run(load_text(WRITER), cwd=workdir, storage=False, **kwargs).runner
    return await asyncio.wait_for(runner.execute(), 60)


def cassette_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def record_writer(tmp_path: Path, allowed: bool) -> Path:
    cassette = tmp_path / f"{'allowed' if allowed else 'refused'}.cassette.jsonl"
    state = await run_writer(tmp_path / "recorded", record=cassette, reader=Confirming([allowed]))
    assert state.status == "completed", state.error
    return cassette


async def test_a_recorded_answer_is_bound_to_the_call_it_answered(tmp_path: Path):
    cassette = await record_writer(tmp_path, allowed=True)

    (line,) = [line for line in cassette_lines(cassette) if line["type"] == "confirm"]
    arguments = '{"path": "out.txt", "content": "hi"}'
    assert line == {
        "type": "confirm",
        "allowed": True,
        "tool": "Write",
        "arguments_sha256": hashlib.sha256(arguments.encode()).hexdigest(),
    }


async def test_a_recorded_approval_never_allows_a_call_on_a_replay_with_nobody_to_ask(
    tmp_path: Path,
):
    cassette = await record_writer(tmp_path, allowed=True)
    workdir = tmp_path / "replayed"

    state = await run_writer(workdir, replay=cassette)

    assert state.status == "failed"
    assert not (workdir / "out.txt").exists()
    assert (
        f'the cassette {cassette} allows Write({{"path": "out.txt", "content": "hi"}}), a tool '
        "call that needs the person's confirmation; a replay never takes an approval from a "
        "cassette, and nobody can be asked in this run"
    ) in state.error
    assert state.exit_code == 1


async def test_a_replay_asks_the_person_again_where_the_recording_allowed_a_call(
    tmp_path: Path,
):
    cassette = await record_writer(tmp_path, allowed=True)
    person = Confirming([True])
    workdir = tmp_path / "replayed"

    state = await run_writer(workdir, replay=cassette, reader=person)

    assert state.status == "completed", state.error
    assert person.questions == ['Allow Write({"path": "out.txt", "content": "hi"})?']
    assert (workdir / "out.txt").read_text() == "hi"


async def test_a_replay_with_yes_allows_the_recorded_call_without_asking(tmp_path: Path):
    cassette = await record_writer(tmp_path, allowed=True)
    workdir = tmp_path / "replayed"
    sink = Collect()

    state = await run_writer(workdir, replay=cassette, yes=True, sink=sink)

    assert state.status == "completed", state.error
    assert (workdir / "out.txt").read_text() == "hi"
    assert sink.of(RunWarning) == []  # the answer nobody needed is no sign of another path


async def test_a_recorded_refusal_of_the_same_call_is_replayed_without_asking(tmp_path: Path):
    cassette = await record_writer(tmp_path, allowed=False)
    workdir = tmp_path / "replayed"
    for person in (None, Confirming([True])):  # nobody there, or a person who would allow
        state = await run_writer(workdir, replay=cassette, reader=person)

        assert state.status == "completed", state.error
        assert person is None or person.questions == []
        assert not (workdir / "out.txt").exists()
        assert state.steps["work"].output == "Written."


async def test_an_edited_cassette_cannot_run_a_call_nobody_approved(tmp_path: Path):
    """The attack: the first reply edited to call something else, and an approval line
    bound to that very call (anyone can compute the hash). Nothing runs without --yes."""
    cassette = await record_writer(tmp_path, allowed=True)
    evil = '{"path": "pwned.txt", "content": "owned"}'
    lines = cassette_lines(cassette)
    for line in lines:
        for event in line.get("events", []):
            if "tool_call" in event:
                event["tool_call"]["arguments"] = evil
        if line["type"] == "confirm":
            line["arguments_sha256"] = hashlib.sha256(evil.encode()).hexdigest()
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines))
    workdir = tmp_path / "replayed"

    state = await run_writer(workdir, replay=cassette)

    assert state.status == "failed"
    assert "a replay never takes an approval from a cassette" in state.error
    assert not (workdir / "pwned.txt").exists()


async def test_an_answer_bound_to_another_call_is_not_used(tmp_path: Path):
    cassette = await record_writer(tmp_path, allowed=False)
    lines = cassette_lines(cassette)
    for line in lines:
        if line["type"] == "confirm":
            line["arguments_sha256"] = hashlib.sha256(b"{}").hexdigest()
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines))
    person = Confirming([False])

    state = await run_writer(tmp_path / "replayed", replay=cassette, reader=person)

    assert person.questions == ['Allow Write({"path": "out.txt", "content": "hi"})?']
    assert state.status == "completed", state.error
