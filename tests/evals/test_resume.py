"""kill -9 in the middle of an eval loses only the runs in flight; `awf eval --resume`
reruns exactly the (case, epoch) pairs that had not finished, and a run the kill cut short
is an ordinary run (`awf status`, `awf resume`). Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.cli import run_awf
from tests.support.eval_project import Project
from tests.support.waiting import wait_until

# Each run waits at its gate (a file named after its case) until the test opens it.
GATED = """\
name: gated
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f "gate-$AWF_EVAL_CASE" ]; do sleep 0.02; done; echo passed $AWF_EVAL_CASE'
    timeout: 120
    on_success: done
  done: {type: terminal}
"""


def awf(project: Project, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "awf_nb.cli", *args, "--storage", str(project.store.root)],
        cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_kill_9_mid_eval_then_resume_runs_exactly_the_unfinished_cases(project: Project) -> None:
    project.write("gated.yaml", GATED)
    project.rows("cases.jsonl", [{"id": f"c{i}"} for i in range(1, 7)])
    project.write_eval(
        "workflow: gated.yaml\ndataset: cases.jsonl\nconcurrency: 2\n"
        "scorers: [{name: ok, condition: 'states.wait.Output startsWith \"passed\"'}]\n"
    )
    first = awf(project, "eval", "t.eval.yaml", "--json")
    evals = project.store.root / "evals"
    wait_until(lambda: evals.is_dir() and any(evals.iterdir()), "the eval's folder")
    folder = next(evals.iterdir())
    runs, results = folder / "runs.jsonl", folder / "results.jsonl"
    (project.root / "gate-c1").touch()
    (project.root / "gate-c2").touch()
    wait_until(lambda: len(lines(results)) == 2, "two finished runs")
    wait_until(lambda: len(lines(runs)) == 4, "two more runs in flight")
    in_flight = {r["case"] for r in lines(runs)} - {r["case"] for r in lines(results)}
    assert in_flight == {"c3", "c4"}
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)

    listed = run_awf("evals", "--json", "--storage", str(project.store.root), cwd=project.root)
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert (entry["status"], entry["runs"], entry["total"]) == ("interrupted", 2, 6)

    for i in range(3, 7):
        (project.root / f"gate-c{i}").touch()
    started_before = len(lines(runs))
    second = awf(project, "eval", "--resume", folder.name[:12], "--json")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    rerun = [(r["case"], r["epoch"]) for r in lines(runs)[started_before:]]
    assert sorted(rerun) == [("c3", 1), ("c4", 1), ("c5", 1), ("c6", 1)]  # each once
    result = json.loads(out)
    assert result["status"] == "completed"
    assert sorted(r["case"] for r in result["rows"]) == [f"c{i}" for i in range(1, 7)]
    assert all(r["passed"] for r in result["rows"])
    # the runs the kill cut short are still in the store, shown as interrupted
    killed = [r["run_id"] for r in lines(runs)[:started_before] if r["case"] in ("c3", "c4")]
    status = run_awf(
        "status", killed[0], "--json", "--storage", str(project.store.root), cwd=project.root
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "interrupted"
    # and `awf resume` finishes it like any run (its case given as the eval gave it)
    case = next(r["case"] for r in lines(runs) if r["run_id"] == killed[0])
    resumed = run_awf(
        "resume", killed[0], "--storage", str(project.store.root),
        cwd=project.root, env={"AWF_EVAL_CASE": str(case)},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    state = project.store.load_state(killed[0])
    assert state.status == "completed" and state.steps["wait"].output.strip() == f"passed {case}"


def test_resume_refuses_options_that_would_change_the_eval(project: Project) -> None:
    done = run_awf("eval", "--resume", "x", "--epochs", "2", cwd=project.root)
    assert done.returncode == 1
    assert "--resume continues an eval as it was started: --epochs cannot change it" in done.stderr


def test_ctrl_c_cancels_the_runs_in_flight_and_says_how_to_resume(project: Project) -> None:
    project.write("gated.yaml", GATED)
    project.rows("cases.jsonl", [{"id": f"c{i}"} for i in range(1, 4)])
    project.write_eval("workflow: gated.yaml\ndataset: cases.jsonl\nconcurrency: 2\n")
    (project.root / "gate-c1").touch()
    process = awf(project, "eval", "t.eval.yaml")
    evals = project.store.root / "evals"
    wait_until(lambda: evals.is_dir() and any(evals.iterdir()), "the eval's folder")
    folder = next(evals.iterdir())
    wait_until(lambda: len(lines(folder / "results.jsonl")) == 1, "the first run finished")
    wait_until(lambda: len(lines(folder / "runs.jsonl")) == 3, "two runs in flight")
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"finish it with: awf eval --resume {folder.name}" in err
    in_flight = [r["run_id"] for r in lines(folder / "runs.jsonl") if r["case"] != "c1"]
    for run_id in in_flight:
        state = json.loads((project.store.root / "runs" / run_id / "state.json").read_text())
        assert state["status"] == "cancelled"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "cancelled"


# A conversation the eval's simulated user answers, behind a gate (a file named after the case).
GATED_CHAT = """\
name: gated-chat
states:
  initial: wait
  wait:
    type: step
    command: 'touch "at-$AWF_EVAL_CASE"; until [ -f "gate-$AWF_EVAL_CASE" ]; do sleep 0.02; done'
    timeout: 120
    on_success: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let us talk"
    options: {replies: ["answer one", "answer two", "answer three", "answer four"]}
    on_success: done
  done: {type: terminal}
"""


def test_awf_resume_of_an_eval_run_keeps_the_eval_limits_and_simulated_user(
    project: Project,
) -> None:
    project.write("gated-chat.yaml", GATED_CHAT)
    project.rows("cases.jsonl", [{"id": "c1"}])
    project.write_eval(
        "workflow: gated-chat.yaml\ndataset: cases.jsonl\n"
        "user: {provider: scripted, options: {replies: [more please, still more, and more]},"
        " persona: a curious person}\n"
        "limits: {max_agent_turns: 2, max_visits: {chat: 1}}\n"
    )
    first = awf(project, "eval", "t.eval.yaml", "--json")
    evals = project.store.root / "evals"
    wait_until(lambda: evals.is_dir() and any(evals.iterdir()), "the eval's folder")
    runs = next(evals.iterdir()) / "runs.jsonl"
    wait_until(lambda: (project.root / "at-c1").exists(), "the run waiting at its gate")
    wait_until(lambda: len(lines(runs)) == 1, "the run in the eval's list")
    run_id = str(lines(runs)[0]["run_id"])
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)

    (project.root / "gate-c1").touch()
    resumed = run_awf(
        "resume", run_id, "--storage", str(project.store.root),
        cwd=project.root, env={"AWF_EVAL_CASE": "c1"},
    )  # fmt: skip
    state = project.store.load_state(run_id)
    # the eval's simulated user still answers the conversation...
    said = [t.content for t in state.steps["chat"].conversation.turns if t.by_partner]
    assert said[:1] == ["more please"], resumed.stderr
    # ...and the eval's max_agent_turns still stops it, after two replies
    assert state.status == "failed", resumed.stderr
    assert "limits.max_agent_turns (2) reached" in state.error
    assert state.agent_turns == 2
    assert state.run_options["limits"]["max_visits"] == {"chat": 1}
