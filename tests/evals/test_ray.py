"""`--executor ray` on a real Ray cluster, driven as a user drives it: the `awf` command
line (and a Python script) in a subprocess, connecting to a head node started as its own
processes (tests/support/ray_cluster.py: usage reporting off, every socket on 127.0.0.1,
two worker CPUs).

The eval runs against the local fake OpenAI-compatible server: its rows are the local
executor's on the same cassettes; the runs Ray workers executed are in the driver's store
(`awf status`, `awf eval-show`); a worker process killed mid-eval is survived; only the
variables the workflow names travel, masked in all that comes back. No mock of Ray.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.cli import AWF, awf_environment, run_awf
from tests.support.eval_project import SERVED_WORKFLOW, Project, served_eval_text
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.peers import require_module
from tests.support.ray_cluster import RayCluster
from tests.support.waiting import free_port, wait_until

CLUSTER_CPUS = 2
# A Ray eval's command: connecting, starting the workers (each imports awf-nb), the runs.
RAY_EVAL_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """A one-node Ray cluster of its own processes, for this file's tests."""
    require_module("ray", "pip install 'awf-nb[ray]'")
    cluster = RayCluster(CLUSTER_CPUS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def served(project: Project) -> Iterator[OpenAIServer]:
    with OpenAIServer(default_reply=Reply.text("I give it 3 stars.\nSCORE: 3")) as server:
        # the workflow names SERVER: it travels to the workers
        project.write("wf2.yaml", SERVED_WORKFLOW.replace("inputs:", "env: [SERVER]\ninputs:", 1))
        project.rows(
            "cases.jsonl", [{"id": "bread", "topic": "bread"}, {"id": "jam", "topic": "jam"}]
        )
        project.write_eval(served_eval_text(server.base_url))
        yield server


def awf(
    project: Project, *args: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """`awf ARGS --storage STORE` in the project folder (a Ray eval's bound)."""
    kw.setdefault("timeout", RAY_EVAL_TIMEOUT)
    return run_awf(*args, "--storage", str(project.store.root), cwd=project.root, env=env, **kw)


def rows_of(completed: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The rows of `awf eval --json`, without what differs from one eval to the next."""
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = json.loads(completed.stdout)["rows"]
    for row in rows:
        for varying in ("run_id", "seconds", "seed"):
            row.pop(varying)
    return sorted(rows, key=lambda row: (row["case"], row["epoch"]))


@pytest.mark.ray
def test_rows_on_ray_are_the_local_rows_and_its_runs_are_in_the_drivers_store(
    ray_cluster: RayCluster, project: Project, served: OpenAIServer
) -> None:
    env = {**ray_cluster.env, "SERVER": served.base_url}
    recorded = awf(project, "eval", "t.eval.yaml", "--record", "cassettes", "--json", env=env)
    local = awf(project, "eval", "t.eval.yaml", "--replay", "cassettes", "--json", env=env)
    on_ray = awf(
        project, "eval", "t.eval.yaml", "--replay", "cassettes", "--json",
        "--executor", "ray", "--ray-address", ray_cluster.address, "--workers", "2", env=env,
    )  # fmt: skip
    assert len(rows_of(on_ray)) == 4
    assert rows_of(on_ray) == rows_of(local) == rows_of(recorded)
    result = json.loads(on_ray.stdout)
    assert result["status"] == "completed"
    # the runs the workers executed, in the driver's store
    run_id = result["rows"][0]["run_id"]
    status = awf(project, "status", run_id, env=env)
    assert status.returncode == 0 and run_id in status.stdout and "completed" in status.stdout
    state = (project.store.run_dir(run_id) / "state.json").read_text()
    assert "sk-test-secret-123456" not in state  # the agent's key, masked on the worker
    shown = awf(project, "eval-show", result["eval_id"], env=env)
    assert shown.returncode == 0, shown.stderr
    assert "bread" in shown.stdout and "jam" in shown.stdout
    # recording on Ray writes the cassettes where a local eval writes them
    again = awf(
        project, "eval", "t.eval.yaml", "--record", "tapes", "--json", "--executor", "ray",
        "--workers", "1", env=env,  # the cluster from RAY_ADDRESS, as Ray does
    )  # fmt: skip
    assert rows_of(again) == rows_of(recorded)
    tapes = sorted(p.name for p in (project.root / "tapes").iterdir())
    assert tapes == sorted(p.name for p in (project.root / "cassettes").iterdir())


@pytest.mark.ray
def test_variants_run_on_ray_as_they_run_locally(
    ray_cluster: RayCluster, project: Project, served: OpenAIServer
) -> None:
    # a variant of another workflow file (its path relocated on the worker) and one with a
    # value set into the workflow: each runs its own workflow there
    project.write(
        "wf3.yaml",
        SERVED_WORKFLOW.replace("name: served", "name: other")
        .replace("inputs:", "env: [SERVER]\ninputs:", 1)
        .replace("Help me with", "Tell me of"),
    )
    text = (project.root / "t.eval.yaml").read_text()
    text += (
        "variants:\n  base: {}\n  other: {workflow: wf3.yaml}\n"
        "  set-one:\n    set: {states.chat.prompt: 'Teach me {{.inputs.topic}}'}\n"
    )
    project.write_eval(text)
    env = {**ray_cluster.env, "SERVER": served.base_url}
    local = awf(project, "eval", "t.eval.yaml", "--seed", "5", "--json", env=env)
    on_ray = awf(
        project, "eval", "t.eval.yaml", "--seed", "5", "--json",
        "--executor", "ray", "--ray-address", ray_cluster.address, "--workers", "2", env=env,
    )  # fmt: skip

    def keyed(done: subprocess.CompletedProcess[str]) -> list[tuple[str, int, str, bool]]:
        assert done.returncode in (0, 3), done.stdout + done.stderr
        rows = json.loads(done.stdout)["rows"]
        return sorted((r["case"], r["epoch"], r["variant"], r["passed"]) for r in rows)

    assert len(keyed(on_ray)) == 12 and keyed(on_ray) == keyed(local)
    prompts = [json.dumps(r.body.get("messages", "")) for r in served.requests]
    assert any("Tell me of bread" in p for p in prompts)
    assert any("Teach me jam" in p for p in prompts)


@pytest.mark.ray
def test_the_python_api_runs_on_ray_and_the_cli_resumes_there(
    ray_cluster: RayCluster, project: Project, served: OpenAIServer
) -> None:
    env = {**ray_cluster.env, "SERVER": served.base_url}
    script = (
        (
            "import json, awf_nb\n"
            "result = awf_nb.evaluate('t.eval.yaml', executor='ray', ray_address=ADDRESS,\n"
            "                         workers=2, epochs=1, storage=STORE, show=False)\n"
            "print(json.dumps({'eval_id': result.eval_id, 'status': result.status,\n"
            "                  'passed': [row.passed for row in result.rows]}))\n"
        )
        .replace("ADDRESS", repr(ray_cluster.address))
        .replace("STORE", repr(str(project.store.root)))
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=project.root, env=awf_environment(env),
        capture_output=True, text=True, timeout=RAY_EVAL_TIMEOUT, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.splitlines()[-1])
    assert result["status"] == "completed" and result["passed"] == [True, True]
    # an interrupted Ray eval (here: one row taken away) resumes on Ray
    results = project.store.root / "evals" / result["eval_id"] / "results.jsonl"
    results.write_text(results.read_text().splitlines()[0] + "\n")
    resumed = awf(
        project, "eval", "--resume", result["eval_id"], "--workers", "1", "--json", env=env
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = json.loads(resumed.stdout)["rows"]
    assert sorted(row["case"] for row in rows) == ["bread", "jam"]
    assert all(row["passed"] for row in rows)


KILL_WORKFLOW = """\
name: waits
env: [MARKS]
inputs: [{name: topic}]
states:
  initial: wait
  wait:
    type: step
    # the run's shell is a child of the Ray worker's process: $PPID is the worker
    command: 'echo $PPID > "$MARKS/$AWF_EVAL_CASE.pid"; until [ -e "$MARKS/go" ]; do sleep 0.05; done; echo went'
    on_success: done
  done: {type: terminal}
"""


@pytest.mark.ray
def test_a_killed_worker_loses_no_run(ray_cluster: RayCluster, project: Project) -> None:
    marks = project.root / "marks"
    marks.mkdir()
    project.write("waits.yaml", KILL_WORKFLOW)
    cases = [f"c{n}" for n in range(8)]
    project.rows("cases.jsonl", [{"id": case, "topic": case} for case in cases])
    project.write_eval("workflow: waits.yaml\ndataset: cases.jsonl\nconcurrency: 2\n")
    env = awf_environment({**ray_cluster.env, "MARKS": str(marks), "NO_COLOR": "1"})
    command = [*AWF, "eval", "t.eval.yaml", "--executor", "ray", "--workers", "2", "--json",
               "--storage", str(project.store.root)]  # fmt: skip
    with subprocess.Popen(
        command, cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    ) as process:  # fmt: skip
        try:
            # two runs in flight on each of the two workers
            wait_until(lambda: len(list(marks.glob("*.pid"))) >= 4, "4 runs in flight", 240)
            first = sorted(marks.glob("*.pid"))[0]
            pid = int(first.read_text())
            worker = psutil.Process(pid)
            assert "CaseWorker" in " ".join(worker.cmdline()), worker.cmdline()
            os.kill(pid, signal.SIGKILL)
            psutil.wait_procs([worker], timeout=30)
            (marks / "go").touch()
            out, err = process.communicate(timeout=RAY_EVAL_TIMEOUT)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, out + err
    result = json.loads(out)
    assert result["status"] == "completed"
    rows = result["rows"]
    assert sorted(row["case"] for row in rows) == cases  # every case, once
    # the killed worker's runs ran again on its restarted process (or say why not)
    for row in rows:
        assert row["passed"] is True or row["error_kind"] == "worker", row
        if row["run_id"]:  # the run that gave the row, in the driver's store
            assert (project.store.run_dir(row["run_id"]) / "state.json").is_file(), row
    assert "a Ray worker died running case" in err
    assert f'case "{first.name.removesuffix(".pid")}" epoch 1' in err


@pytest.mark.ray
def test_only_the_variables_the_workflow_names_travel_and_come_back_masked(
    ray_cluster: RayCluster, project: Project
) -> None:
    project.write(
        "env.yaml",
        """\
        name: envs
        env: [DEPLOY_TOKEN]
        inputs: [{name: topic}]
        states:
          initial: show
          show:
            type: step
            command: 'echo "token=$DEPLOY_TOKEN other=${NOT_NAMED:-unset}"'
            on_success: done
          done: {type: terminal}
        """,
    )
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    project.write_eval("workflow: env.yaml\ndataset: cases.jsonl\n")
    env = {**ray_cluster.env, "DEPLOY_TOKEN": "tok-very-secret-987", "NOT_NAMED": "driver-only"}
    completed = awf(project, "eval", "t.eval.yaml", "--executor", "ray", "--json", env=env)
    assert completed.returncode == 0, completed.stderr
    (row,) = json.loads(completed.stdout)["rows"]
    assert row["status"] == "completed" and row["passed"] is True, row
    run_dir = project.store.run_dir(row["run_id"])
    files = "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    assert "other=unset" in files  # NOT_NAMED stayed on the driver
    assert "token=" in files and "tok-very-secret-987" not in files  # travelled, masked


@pytest.mark.ray
def test_a_cluster_that_refuses_the_driver_is_a_clear_error(
    ray_cluster: RayCluster, project: Project, tmp_path: Path
) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    project.write_eval('workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "x"}\n')
    # no token: the cluster (token authentication, Ray's default) refuses the driver
    env = {**ray_cluster.env, "RAY_AUTH_TOKEN": None, "HOME": str(tmp_path)}
    completed = awf(project, "eval", "t.eval.yaml", "--executor", "ray", env=env)
    assert completed.returncode == 1, completed.stderr
    assert f"cannot connect to the Ray cluster at {ray_cluster.address}" in completed.stderr
    assert "RAY_AUTH_MODE=token" in completed.stderr
    assert "internal error" not in completed.stderr
    # connected before the eval's folder is made: a failed connection leaves no eval
    evals = project.store.root / "evals"
    assert not evals.exists() or not any(evals.iterdir())
    # nothing listens there: said at once, not after Ray's minutes of retries
    nowhere = f"127.0.0.1:{free_port()}"
    completed = awf(
        project, "eval", "t.eval.yaml", "--executor", "ray", "--ray-address", nowhere, env=env
    )
    assert completed.returncode == 1, completed.stderr
    assert f"cannot connect to the Ray cluster at {nowhere}: Connection refused" in (
        completed.stderr
    )
    # more workers than the cluster has CPUs: said, not left pending
    completed = awf(project, "eval", "t.eval.yaml", "--executor", "ray", "--workers", "5",
                    env=ray_cluster.env)  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    assert "--workers must be a whole number from 1 to 2 (the cluster's CPUs), got 5" in (
        completed.stderr
    )


def test_without_ray_the_error_names_the_extra(project: Project, tmp_path: Path) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    project.write_eval('workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "x"}\n')
    hidden = tmp_path / "no-ray"
    hidden.mkdir()
    # first on the import path: `import ray` fails as it does where Ray is not installed
    (hidden / "ray.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n"
    )
    completed = awf(project, "eval", "t.eval.yaml", "--executor", "ray", import_first=[hidden])
    assert completed.returncode == 1, completed.stderr
    assert "--executor ray needs Ray, which is not installed" in completed.stderr
    assert "pip install 'awf-nb[ray]'" in completed.stderr
    assert not (project.store.root / "evals").exists() or not any(
        (project.store.root / "evals").iterdir()
    )  # nothing started


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or ip).is_loopback


@pytest.mark.ray
def test_no_ray_process_listens_on_a_non_loopback_address(ray_cluster: RayCluster) -> None:
    listening = []
    for process in ray_cluster.processes():
        try:
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        listening += [
            (process.pid, conn.laddr.ip, conn.laddr.port)
            for conn in connections
            if conn.status == psutil.CONN_LISTEN
        ]
    assert listening, "the Ray processes listen nowhere?"
    outside = [entry for entry in listening if not is_loopback(entry[1])]
    assert not outside, outside


@pytest.mark.ray
def test_the_notebook_magic_passes_the_ray_options_on(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.frontends.notebook.eval_magic import _parse, _prepare

    require_module("ray", "pip install 'awf-nb[ray]'")
    from awf_nb.evals.ray_executor import RayExecutor

    monkeypatch.setattr(RayExecutor, "connect", lambda self: None)  # no cluster at :1
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    body = 'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "x"}\n'
    line = f"--executor ray --ray-address 127.0.0.1:1 --workers 3 --storage {project.store.root}"
    run = _prepare(_parse(line), body)
    assert run.executor.name == "ray"
    assert (run.executor.address, run.executor.workers) == ("127.0.0.1:1", 3)
    assert run.manifest.executor == "ray"  # and so --resume runs it on Ray
    assert run.executor.describe(4) == "4 at a time on each of 3 Ray workers"


GATED = """\
name: gated
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f "gate-$AWF_EVAL_CASE" ]; do sleep 0.02; done; echo passed'
    timeout: 120
    on_success: done
  done: {type: terminal}
"""


@pytest.mark.ray
def test_ctrl_c_cancels_a_ray_eval_and_resume_finishes_it_on_ray(
    ray_cluster: RayCluster, project: Project
) -> None:
    # the workers run in a copy of the project folder (the job's working directory): a gate
    # the test opened in the project would not reach them, so the runs wait on absolute paths
    gates = project.root / "gates"
    gates.mkdir()
    project.write("gated.yaml", GATED.replace("gate-$AWF_EVAL_CASE", f"{gates}/$AWF_EVAL_CASE"))
    project.rows("cases.jsonl", [{"id": f"c{i}"} for i in range(1, 4)])
    project.write_eval("workflow: gated.yaml\ndataset: cases.jsonl\nconcurrency: 1\n")
    (gates / "c1").touch()
    env = awf_environment({**ray_cluster.env, "NO_COLOR": "1"})
    command = [*AWF, "eval", "t.eval.yaml", "--executor", "ray", "--workers", "2",
               "--storage", str(project.store.root)]  # fmt: skip
    evals = project.store.root / "evals"
    with subprocess.Popen(
        command, cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    ) as process:  # fmt: skip
        try:
            wait_until(lambda: evals.is_dir() and any(evals.iterdir()), "the eval's folder", 120)
            folder = next(evals.iterdir())
            results, runs = folder / "results.jsonl", folder / "runs.jsonl"
            wait_until(lambda: results.is_file() and results.read_text().count("\n") == 1,
                       "the first run finished", 240)  # fmt: skip
            wait_until(lambda: runs.read_text().count("\n") == 3, "two runs in flight", 240)
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "never retrieved" not in err  # a clean stop
    assert f"finish it with: awf eval --resume {folder.name}" in err
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "cancelled"

    # the runs in flight were stopped on the workers, their commands too
    def waiting() -> list[int]:
        return [p.pid for p in psutil.process_iter(["cmdline"])
                if str(gates) in " ".join(p.info["cmdline"] or [])]  # fmt: skip

    wait_until(lambda: not waiting(), "the cancelled runs' commands stopped", 60)
    for case in ("c2", "c3"):
        (gates / case).touch()
    resumed = awf(project, "eval", "--resume", folder.name, "--json", env=ray_cluster.env)
    assert resumed.returncode == 0, resumed.stderr
    rows = json.loads(resumed.stdout)["rows"]
    assert sorted(row["case"] for row in rows) == ["c1", "c2", "c3"]
    assert all(row["passed"] for row in rows), rows


HOSTILE_WORKFLOW = """\
name: hostile
inputs: [{name: topic}]
states:
  initial: show
  show:
    type: step
    command: >-
      echo "topic={{.inputs.topic}}";
      for f in .env .env.local secrets/db.txt id_rsa server.pem listed.key; do
      if [ -e "$f" ]; then echo "sent:$f"; else echo "kept:$f"; fi; done;
      echo "workdir=$PWD"; echo "mode=$(stat -c %a "$(dirname "$PWD")")/$(stat -c %a wf.yaml)"
    on_success: done
  done: {type: terminal}
"""


def stored_text(root: Path) -> str:
    """Every file under `root`, as text (what `awf status` and the rest read)."""
    return "".join(
        path.read_bytes().decode(errors="replace") for path in root.rglob("*") if path.is_file()
    )


@pytest.mark.ray
def test_secrets_from_the_environment_and_secret_files_stay_home(
    ray_cluster: RayCluster, project: Project
) -> None:
    token = "tok-from-env-5551234"
    project.write("wf.yaml", HOSTILE_WORKFLOW)
    for name in (".env", ".env.local", "secrets/db.txt", "id_rsa", "server.pem", "listed.key"):
        project.write(name, "do-not-send\n")
    project.rows("cases.jsonl", [{"id": "a"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.env.MY_API_TOKEN}}"}\n'
    )
    # a driver that does not set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: Ray would swap the
    # loopback address for the machine's network address, where this cluster is not
    env = {**ray_cluster.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": None,
           "MY_API_TOKEN": token, "AWF_RAY_FILES": "listed.key"}  # fmt: skip
    local = awf(project, "eval", "t.eval.yaml", "--json", env=env)
    assert local.returncode == 0, local.stderr
    assert token not in stored_text(project.store.root)  # the local executor masks it
    completed = awf(
        project, "eval", "t.eval.yaml", "--json", "--executor", "ray",
        "--ray-address", ray_cluster.address, env=env,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (row,) = json.loads(completed.stdout)["rows"]
    assert row["passed"] is True, row
    transcript = stored_text(project.store.run_dir(row["run_id"]))  # state and transcript
    assert "topic=***" in transcript  # the value travelled, and came back masked
    assert token not in stored_text(project.store.root)
    status = awf(project, "status", row["run_id"], env=env)
    assert status.returncode == 0 and token not in status.stdout + status.stderr
    # files whose names look secret stayed, but the one listed in AWF_RAY_FILES
    for name in (".env", ".env.local", "secrets/db.txt", "id_rsa", "server.pem"):
        assert f"kept:{name}" in transcript, name
    assert "sent:listed.key" in transcript
    # unpacked in a folder of the worker's own, private, and removed after the eval
    assert "mode=700/600" in transcript
    workdir = Path(transcript.split("workdir=", 1)[1].split("\\n", 1)[0].split('"', 1)[0])
    assert workdir.name == "work" and workdir.parent.name.startswith("awf-ray-worker-")
    assert not workdir.parent.exists()
