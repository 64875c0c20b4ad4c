"""Branch from here (`awf_nb.runs.fork`): a new run from a stored run's history up to a
step or a conversation's message, the original's files untouched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from awf_nb.errors import UserError
from awf_nb.runs import prepare_run
from awf_nb.runs.fork import fork_run
from awf_nb.runs.options import Resume
from awf_nb.workflow.loader import load_text

pytestmark = pytest.mark.asyncio


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


FLOW = """
name: flow
states:
  initial: prep
  prep: {type: command, command: "echo prepared", on_success: chat}
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Hello from {{.states.prep.Output}}"
    options: {replies: ["r1", "r2", "r3", "r4", "r5"]}
    on_success: after
  after: {type: command, command: "echo after", on_success: done}
  done: {type: terminal}
"""


def folder_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


async def _original(store, workdir):
    prepared = prepare_run(
        load_text(FLOW), replies=["more", "again", ""], storage=store, cwd=workdir
    )
    state = await prepared.runner.execute()
    assert state.status == "completed", state.error
    return state


async def test_fork_at_a_conversation_turn_with_an_edit(store, workdir):
    original = await _original(store, workdir)
    before = folder_hash(store.run_dir(original.run_id))
    new_id, point = fork_run(store, original.run_id, "chat#3", "EDITED question")
    state = await prepare_run(
        Resume(new_id, from_step=point.step), storage=store, replies=[""], cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    assert state.forked_from == {"run": original.run_id, "step": "chat", "turn": 3}
    turns = [(t.role, t.content) for t in state.steps["chat"].conversation.turns]
    assert turns[:3] == [
        ("user", "Hello from prepared"),
        ("assistant", "r1"),
        ("user", "EDITED question"),
    ]
    assert turns[3][0] == "assistant" and len(turns) == 4
    assert state.steps["after"].output.strip() == "after"
    assert store.load_state(new_id).forked_from["run"] == original.run_id
    assert folder_hash(store.run_dir(original.run_id)) == before
    lines = store.read_transcript(new_id)
    assert any(r.get("content") == "EDITED question" for r in lines)


async def test_fork_at_a_command_step_reruns_it_and_keeps_what_came_before(store, workdir):
    original = await _original(store, workdir)
    before = folder_hash(store.run_dir(original.run_id))
    new_id, _ = fork_run(store, original.run_id, "after")
    state = await prepare_run(
        Resume(new_id, from_step="after"), storage=store, cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    assert state.executed == ["prep", "chat", "after", "done"]
    assert state.steps["chat"].conversation.turns == original.steps["chat"].conversation.turns
    assert folder_hash(store.run_dir(original.run_id)) == before


async def test_fork_refuses_a_step_that_did_not_run_and_a_turn_past_the_end(store, workdir):
    original = await _original(store, workdir)
    with pytest.raises(UserError, match='step "nope" did not run'):
        fork_run(store, original.run_id, "nope")
    with pytest.raises(UserError, match="past its end"):
        fork_run(store, original.run_id, "chat#99")
    with pytest.raises(UserError, match="is not STEP or STEP#TURN"):
        fork_run(store, original.run_id, "chat#x")
    with pytest.raises(UserError, match="--edit replaces a message of a conversation"):
        fork_run(store, original.run_id, "chat", "x")


async def test_fork_at_a_step_with_an_edit_gives_it_that_output(store, workdir):
    original = await _original(store, workdir)
    new_id, point = fork_run(store, original.run_id, "prep", "edited soil")
    state = await prepare_run(
        Resume(new_id, from_step=point.resume_step), storage=store, replies=[""], cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    assert state.steps["prep"].output == "edited soil"
    assert state.steps["chat"].conversation.turns[0].content == "Hello from edited soil"


async def test_an_edited_secret_is_masked(store, workdir, monkeypatch):
    text = FLOW.replace("name: flow", "name: flow\nenv: [API_KEY]")
    monkeypatch.setenv("API_KEY", "sk-very-secret-123")
    prepared = prepare_run(load_text(text), replies=["more", ""], storage=store, cwd=workdir)
    original = await prepared.runner.execute()
    new_id, _ = fork_run(store, original.run_id, "chat#3", "key is sk-very-secret-123")
    raw = (store.run_dir(new_id) / "state.json").read_text() + (
        store.run_dir(new_id) / "transcript.jsonl"
    ).read_text()
    assert "sk-very-secret-123" not in raw


KINDS = """
name: kinds
states:
  initial: fan
  fan: {type: parallel, parallel: [a, b], on_success: each}
  a: {type: step, command: "echo A"}
  b: {type: step, command: "echo B"}
  each: {type: for_each, items: [1, 2], body: [item], on_success: done}
  item: {type: step, command: "echo item {{.loop.Item}}"}
  done: {type: terminal}
"""


@pytest.mark.parametrize("at", ["fan", "each"])
async def test_fork_at_a_parallel_step_and_a_loop_step(store, workdir, at):
    original = await prepare_run(load_text(KINDS), storage=store, cwd=workdir).runner.execute()
    assert original.status == "completed", original.error
    before = folder_hash(store.run_dir(original.run_id))
    new_id, point = fork_run(store, original.run_id, at)
    state = await prepare_run(
        Resume(new_id, from_step=point.step), storage=store, cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    assert state.steps["item"].output.strip() == "item 2"
    assert state.steps["a"].output.strip() == "A"
    assert folder_hash(store.run_dir(original.run_id)) == before


def _kinds_file(workdir: Path, child_header: str = "name: child") -> Path:
    """A workflow with a parallel step (branch b a conversation), a loop and a called
    workflow holding a conversation."""
    (workdir / "child.yaml").write_text(
        child_header
        + """
states:
  initial: first
  first: {type: step, command: "echo child first", on_success: talk}
  talk:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "child hello"
    options: {replies: ["c1", "c2", "c3"]}
    on_success: end
  end: {type: terminal, message: "{{.states.talk.Output}}"}
"""
    )
    path = workdir / "kinds.yaml"
    path.write_text(
        """
name: kinds
states:
  initial: fan
  fan: {type: parallel, parallel: [a, b], on_success: each}
  a: {type: step, command: "echo A; echo ran >> a.count"}
  b: {type: step, command: "echo B; echo ran >> b.count"}
  each: {type: for_each, items: [1, 2, 3], body: [item], on_success: sub}
  item: {type: step, command: "echo item {{.loop.Item}}; echo {{.loop.Item}} >> items.log"}
  sub: {type: call_workflow, workflow: child, on_success: done}
  done: {type: terminal, message: "{{.states.sub.Output}}"}
"""
    )
    return path


async def _kinds_original(store, workdir, child_header: str = "name: child"):
    from awf_nb.workflow.loader import load_workflow

    path = _kinds_file(workdir, child_header)
    prepared = prepare_run(load_workflow(path), replies=["more", ""], storage=store, cwd=workdir)
    state = await prepared.runner.execute()
    assert state.status == "completed", state.error
    return state


async def _go_on(store, workdir, new_id, point, replies=("",)):
    return await prepare_run(
        Resume(new_id, from_step=point.resume_step),
        storage=store,
        replies=list(replies),
        cwd=workdir,
    ).runner.execute()


async def test_fork_inside_one_parallel_branch_keeps_the_other(store, workdir):
    original = await _kinds_original(store, workdir)
    before = folder_hash(store.run_dir(original.run_id))
    new_id, point = fork_run(store, original.run_id, "b")
    assert point.resume_step == "fan"
    state = await _go_on(store, workdir, new_id, point)
    assert state.status == "completed", state.error
    assert (workdir / "a.count").read_text() == "ran\n"  # branch a kept, not run again
    assert (workdir / "b.count").read_text() == "ran\nran\n"
    assert state.steps["fan"].response == {"a": "A", "b": "B"}
    assert state.forked_from == {"run": original.run_id, "step": "b", "turn": None}
    assert folder_hash(store.run_dir(original.run_id)) == before


async def test_fork_at_a_loop_iteration_keeps_the_earlier_ones(store, workdir):
    original = await _kinds_original(store, workdir)
    before = folder_hash(store.run_dir(original.run_id))
    new_id, point = fork_run(store, original.run_id, "each#3")
    assert point.resume_step == "each"
    forked = store.load_state(new_id)
    assert forked.steps["item"].output == "item 2"  # as it was when iteration 3 began
    state = await _go_on(store, workdir, new_id, point)
    assert state.status == "completed", state.error
    assert (workdir / "items.log").read_text() == "1\n2\n3\n3\n"  # only iteration 3 again
    assert json.loads(state.steps["each"].output) == ["item 1", "item 2", "item 3"]
    assert [v["Visit"] for v in state.steps["item"].visits_view()] == [1, 2, 3]
    assert folder_hash(store.run_dir(original.run_id)) == before
    with pytest.raises(UserError, match=r'loop "each" of run .* ran 3 iterations; --at each#4'):
        fork_run(store, original.run_id, "each#4")


async def test_fork_inside_a_called_workflow_with_an_edit(store, workdir):
    original = await _kinds_original(store, workdir)
    child_id = original.steps["sub"].child_run
    assert child_id and store.load_state(child_id).parent_run_id == original.run_id
    before = {r: folder_hash(store.run_dir(r)) for r in (original.run_id, child_id)}
    new_id, point = fork_run(store, original.run_id, "sub/talk#3", "EDITED in the child")
    assert point.resume_step == "sub"
    state = await _go_on(store, workdir, new_id, point)
    assert state.status == "completed", state.error
    new_child = store.load_state(state.steps["sub"].child_run)
    assert new_child.run_id not in (child_id, new_id)
    assert new_child.parent_run_id == new_id
    assert new_child.forked_from == {"run": child_id, "step": "talk", "turn": 3}
    users = [t.content for t in new_child.steps["talk"].conversation.turns if t.role == "user"]
    assert users == ["child hello", "EDITED in the child"]
    assert new_child.steps["first"].output == "child first"
    assert state.steps["item"].output == "item 3"  # the parent's steps before sub kept
    assert {r: folder_hash(store.run_dir(r)) for r in before} == before


async def test_an_edited_secret_inside_a_called_workflow_is_masked(store, workdir, monkeypatch):
    monkeypatch.setenv("API_KEY", "sk-child-secret-55")
    original = await _kinds_original(store, workdir, "name: child\nenv: [API_KEY]")
    new_id, point = fork_run(store, original.run_id, "sub/talk#3", "key sk-child-secret-55")
    state = await _go_on(store, workdir, new_id, point)
    assert state.status == "completed", state.error
    for run in (new_id, state.steps["sub"].child_run):
        folder = store.run_dir(run)
        raw = "".join(p.read_text() for p in folder.iterdir() if p.suffix in (".json", ".jsonl"))
        assert "sk-child-secret-55" not in raw


async def test_fork_refusals_inside_steps_are_one_clear_line(store, workdir):
    original = await _kinds_original(store, workdir)
    with pytest.raises(UserError, match='"b" is a branch of parallel step "fan"'):
        fork_run(store, original.run_id, "b#1")
    with pytest.raises(UserError, match=r'step "each" of run .* is not a call_workflow step'):
        fork_run(store, original.run_id, "each/item")
    with pytest.raises(UserError, match="--edit replaces a message"):
        fork_run(store, original.run_id, "each#2", "x")
    with pytest.raises(UserError, match=r'step "item" runs in loop "each" .* --at each#N'):
        fork_run(store, original.run_id, "item")


async def test_an_edited_step_output_with_a_secret_is_masked(store, workdir, monkeypatch):
    text = FLOW.replace("name: flow", "name: flow\nenv: [API_KEY]")
    monkeypatch.setenv("API_KEY", "sk-output-secret-77")
    prepared = prepare_run(load_text(text), replies=[""], storage=store, cwd=workdir)
    original = await prepared.runner.execute()
    new_id, point = fork_run(store, original.run_id, "prep", "key sk-output-secret-77")
    state = await prepare_run(
        Resume(new_id, from_step=point.resume_step), storage=store, replies=[""], cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    raw = "".join(
        p.read_text() for p in store.run_dir(new_id).iterdir() if p.suffix in (".json", ".jsonl")
    )
    assert "sk-output-secret-77" not in raw and "key ***" in state.steps["prep"].output


async def test_fork_at_the_first_message_with_an_edit_sends_the_edit_only(store, workdir):
    original = await _original(store, workdir)
    new_id, point = fork_run(store, original.run_id, "chat#1", "Hello from a courtyard")
    state = await prepare_run(
        Resume(new_id, from_step=point.resume_step), storage=store, replies=[""], cwd=workdir
    ).runner.execute()
    assert state.status == "completed", state.error
    turns = [(t.role, t.content) for t in state.steps["chat"].conversation.turns]
    assert turns == [("user", "Hello from a courtyard"), ("assistant", "r1")]


async def test_awf_nb_afork_branches_a_stored_run_and_refuses_no_storage(store, workdir):
    import awf_nb

    original = await _original(store, workdir)
    result = await awf_nb.afork(
        original.run_id, "chat#3", "EDITED", storage=store, replies=[""], cwd=workdir, show=False
    )
    assert result.status == "completed"
    assert result.state.forked_from == {"run": original.run_id, "step": "chat", "turn": 3}
    with pytest.raises(UserError, match="without storage: a branch is a stored run"):
        await awf_nb.afork(original.run_id, "chat#3", "EDITED", storage=False, show=False)
