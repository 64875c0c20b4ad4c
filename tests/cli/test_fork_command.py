"""`awf fork RUN_ID --at STEP[#TURN] [--edit TEXT|@FILE]` through the real command line."""

from __future__ import annotations

import json

from tests.support.cli import only_run_id


def test_fork_at_a_turn_with_an_edit_from_a_file(awf, chat, storage, tmp_path):
    first = awf("run", str(chat), "--reply", "more", "--reply", "")
    assert first.returncode == 0, first.stderr
    original = only_run_id(storage)
    (tmp_path / "edit.txt").write_text("tell me about rye instead")
    result = awf("fork", original, "--at", "chat#3", "--edit", "@edit.txt", "--reply", "")
    assert result.returncode == 0, result.stderr
    assert f"forked {original} at chat#3 as run" in result.stderr
    runs = sorted(p.name for p in (storage / "runs").iterdir())
    assert len(runs) == 2
    forked = next(r for r in runs if r != original)
    state = json.loads((storage / "runs" / forked / "state.json").read_text())
    assert state["forked_from"] == {"run": original, "step": "chat", "turn": 3}
    users = [
        t["content"] for t in state["steps"]["chat"]["conversation"]["turns"] if t["role"] == "user"
    ]
    assert users[-1] == "tell me about rye instead"


def test_fork_at_a_step_that_did_not_run_is_one_clear_line(awf, chat, storage):
    assert awf("run", str(chat), "--reply", "").returncode == 0
    result = awf("fork", only_run_id(storage), "--at", "nowhere")
    assert result.returncode != 0
    assert 'step "nowhere" did not run in run' in result.stderr


def test_runs_diff_marks_the_first_difference(awf, chat, storage):
    assert awf("run", str(chat), "--reply", "more", "--reply", "").returncode == 0
    original = only_run_id(storage)
    assert awf("fork", original, "--at", "chat#3", "--edit", "other", "--reply", "").returncode == 0
    forked = next(p.name for p in (storage / "runs").iterdir() if p.name != original)
    result = awf("runs-diff", original, forked)
    assert result.returncode == 0, result.stderr
    assert "the runs diverge at chat#3" in result.stdout
    assert ">>chat#3" in result.stdout
    data = json.loads(awf("runs-diff", original, forked, "--json").stdout)
    assert data["rows"][0] == {
        "where": "chat#3",
        "a": "user: more",
        "b": "user: other",
        "first": True,
    }
    same = awf("runs-diff", original, original)
    assert "are the same" in same.stdout


def test_history_tree_shows_forks_under_their_run(awf, chat, storage):
    assert awf("run", str(chat), "--reply", "more", "--reply", "").returncode == 0
    original = only_run_id(storage)
    assert awf("fork", original, "--at", "chat#3", "--edit", "x", "--reply", "").returncode == 0
    first = next(p.name for p in (storage / "runs").iterdir() if p.name != original)
    assert awf("fork", first, "--at", "chat", "--reply", "").returncode == 0
    second = next(p.name for p in (storage / "runs").iterdir() if p.name not in (original, first))
    result = awf("history", "--tree")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("RUN ID") and lines[0].endswith("FORKED AT")
    column = lines[0].index("WORKFLOW")
    assert [line[:column].rstrip() for line in lines[1:]] == [
        original,
        f"└─ {first}",
        f"   └─ {second}",
    ]
    assert lines[2].endswith("chat#3") and lines[3].endswith("chat")
    # Only the fork listed: it says which run it came from.
    alone = awf("history", "--tree", "-n", "1").stdout.splitlines()
    assert alone[1].startswith(second) and alone[1].endswith(f"chat of {first}")
    data = json.loads(awf("history", "--tree", "--json").stdout)
    by_id = {row["run_id"]: row["forked_from"] for row in data}
    assert by_id == {
        original: None,
        first: {"run": original, "at": "chat#3"},
        second: {"run": first, "at": "chat"},
    }


def test_fork_inside_a_called_workflow_and_a_loop_iteration(awf, storage, tmp_path):
    (tmp_path / "child.yaml").write_text(
        "name: child\nstates:\n  initial: talk\n"
        "  talk: {type: agent, provider: scripted, mode: conversation, prompt: hi,"
        " options: {replies: [c1, c2]}, on_success: end}\n"
        "  end: {type: terminal}\n"
    )
    (tmp_path / "wf.yaml").write_text(
        "name: wf\nstates:\n  initial: each\n"
        "  each: {type: for_each, items: [1, 2], body: [item], on_success: sub}\n"
        '  item: {type: step, command: "echo {{.loop.Item}} >> items.log"}\n'
        "  sub: {type: call_workflow, workflow: child, on_success: done}\n"
        "  done: {type: terminal}\n"
    )
    assert awf("run", "wf.yaml", "--reply", "more", "--reply", "").returncode == 0
    (original,) = [  # the child the call step ran is a run of its own, with a parent
        p.parent.name
        for p in storage.glob("runs/*/state.json")
        if not json.loads(p.read_text())["parent_run_id"]
    ]
    result = awf("fork", original, "--at", "sub/talk#3", "--edit", "changed", "--reply", "")
    assert result.returncode == 0, result.stderr
    assert f"forked {original} at sub/talk#3 as run" in result.stderr
    result = awf("fork", original, "--at", "each#2")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "items.log").read_text() == "1\n2\n2\n"
    states = [json.loads(p.read_text()) for p in storage.glob("runs/*/state.json")]
    children = [s for s in states if s.get("forked_from") and s["parent_run_id"]]
    assert len(children) == 1
    turns = children[0]["steps"]["talk"]["conversation"]["turns"]
    assert [t["content"] for t in turns if t["role"] == "user"] == ["hi", "changed"]
