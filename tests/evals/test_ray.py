"""`--executor ray` on a real Ray cluster: a head node started as its own processes (`ray
start --head`, usage reporting off, every socket on 127.0.0.1), with two worker CPUs.

The eval runs against the local fake OpenAI-compatible server: its rows are the local
executor's on the same cassettes; the runs Ray workers executed are in the driver's store
(`awf status`, `awf eval-show`); a worker process killed mid-eval is survived; only the
variables the workflow names travel, masked in all that comes back. No mock of Ray.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from awf_nb.cli import main
from awf_nb.errors import UserError
from awf_nb.evals.api import prepare_eval, prepare_resume
from awf_nb.evals.results import EvalResult, EvalRow
from tests.evals.conftest import Project
from tests.evals.test_cassettes import WORKFLOW as SERVED_WORKFLOW
from tests.evals.test_cassettes import comparable, eval_text
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.waiting import until

pytestmark = pytest.mark.ray

# Ray's variables for every process of the test cluster (and the driver): no usage
# reporting; with the second, Ray binds and advertises loopback only (and so stays one node);
# no worker processes started ahead of use (they would slow the node's start on a busy CPU).
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_enable_worker_prestart": "0",
}
CLUSTER_CPUS = 2
RAY_START_TIMEOUT = 180
CLUSTER: dict[str, str] = {}  # the running test cluster's temp dir


def ray_command() -> list[str]:
    """`ray` (through the launcher that waits longer for the node to register)."""
    return [sys.executable, "-m", "tests.support.ray_start"]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster of its own processes; its address (also RAY_ADDRESS)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'awf-nb[ray]')")
    temp = tmp_path_factory.mktemp("ray")
    CLUSTER["temp"] = str(temp)
    saved = {name: os.environ.get(name) for name in (*RAY_ENV, "RAY_ADDRESS")}
    os.environ.update(RAY_ENV)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(root)}
    started = subprocess.run(
        [*ray_command(), "start", "--head", "--port=0", "--include-dashboard=false",
         "--include-log-monitor=false", "--disable-usage-stats", f"--num-cpus={CLUSTER_CPUS}",
         f"--temp-dir={temp}"],
        env=env, capture_output=True, text=True, timeout=RAY_START_TIMEOUT, check=False,
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        address = (temp / "ray_current_cluster").read_text().strip()
        assert address.startswith("127.0.0.1:"), address
        os.environ["RAY_ADDRESS"] = address
        yield address
    finally:
        subprocess.run(
            [*ray_command(), "stop", "--force"], env=env, capture_output=True,
            timeout=RAY_START_TIMEOUT, check=False,
        )  # fmt: skip
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def served(project: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    with OpenAIServer(default_reply=Reply.text("I give it 3 stars")) as server:
        monkeypatch.setenv("SERVER", server.base_url)
        # the workflow names SERVER: it travels to the workers
        project.write("wf2.yaml", SERVED_WORKFLOW.replace("inputs:", "env: [SERVER]\ninputs:", 1))
        project.rows(
            "cases.jsonl", [{"id": "bread", "topic": "bread"}, {"id": "jam", "topic": "jam"}]
        )
        yield server


async def evaluate(project: Project, text: str, **kwargs: object) -> EvalResult:
    path = project.write_eval(text)
    return await prepare_eval(path, storage=project.store, **kwargs).execute()  # type: ignore[arg-type]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


async def test_rows_on_ray_are_the_local_rows_and_its_runs_are_in_the_drivers_store(
    ray_cluster: str,
    project: Project,
    served: OpenAIServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = eval_text(served.base_url)
    recorded = await evaluate(project, text, record="cassettes")
    local = await evaluate(project, text, replay="cassettes")
    on_ray = await evaluate(
        project, text, replay="cassettes", executor="ray", ray_address=ray_cluster, workers=2
    )
    assert on_ray.status == "completed" and len(on_ray.rows) == 4
    assert comparable(on_ray) == comparable(local) == comparable(recorded)
    # recording on Ray writes the cassettes where a local eval does
    again = await evaluate(project, text, record="tapes", executor="ray", workers=1)
    assert comparable(again) == comparable(recorded)
    assert sorted(p.name for p in (project.root / "tapes").iterdir()) == sorted(
        p.name for p in (project.root / "cassettes").iterdir()
    )
    storage = ["--storage", str(project.store.root)]
    run_id = on_ray.rows[0].run_id
    code, out = cli(capsys, "status", run_id, *storage)
    assert code == 0 and run_id in out and "completed" in out
    assert "sk-test-secret-123456" not in (project.store.run_dir(run_id) / "state.json").read_text()
    code, out = cli(capsys, "eval-show", on_ray.eval_id, *storage)
    assert code == 0 and "bread" in out and "jam" in out


async def test_the_cli_runs_on_ray_and_resume_finishes_there(
    ray_cluster: str,
    project: Project,
    served: OpenAIServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project.write_eval(eval_text(served.base_url))
    storage = ["--storage", str(project.store.root)]
    code, out = cli(
        capsys, "eval", "t.eval.yaml", "--executor", "ray", "--ray-address", ray_cluster,
        "--workers", "2", "--epochs", "1", "--json", *storage,
    )  # fmt: skip
    result = json.loads(out)
    assert code == 0, out
    assert [row["passed"] for row in result["rows"]] == [True, True]
    # an interrupted Ray eval (here: one row taken away) resumes on Ray
    eval_id = result["eval_id"]
    results = project.store.root / "evals" / eval_id / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n")
    resumed = await prepare_resume(eval_id, storage=project.store, workers=1).execute()
    assert resumed.status == "completed" and len(resumed.rows) == 2
    assert type(resumed).__name__ == "EvalResult"


async def test_a_killed_worker_loses_no_run(
    ray_cluster: str, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slow replies: runs are in flight on both workers when one is killed
    with OpenAIServer(default_reply=Reply.text("a slow 3 answer", delay=0.05)) as server:
        monkeypatch.setenv("SERVER", server.base_url)
        project.write("wf2.yaml", SERVED_WORKFLOW.replace("inputs:", "env: [SERVER]\ninputs:", 1))
        project.rows("cases.jsonl", [{"id": f"c{n}", "topic": f"t{n}"} for n in range(8)])
        path = project.write_eval(eval_text(server.base_url).replace("epochs: 2", "epochs: 1"))
        run = prepare_eval(path, storage=project.store, executor="ray", workers=2, concurrency=2)
        started: list[str] = []

        class Progress:
            def eval_started(self, run: object) -> None: ...
            def run_started(self, case: str, epoch: int, run_id: str) -> None:
                started.append(run_id)

            def run_finished(self, row: EvalRow) -> None: ...
            def eval_finished(self, result: EvalResult) -> None: ...

        task = asyncio.create_task(run.execute(Progress()))
        await until(lambda: len(started) >= 3, "runs in flight on the Ray workers", 120)
        actor = run.executor.actors[0]  # type: ignore[attr-defined]
        pid = await actor.pid.remote()
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(task, 300)
    assert result.status == "completed"
    assert sorted(row.case for row in result.rows) == [f"c{n}" for n in range(8)]
    for row in result.rows:  # retried on the restarted worker, or an error saying so
        assert row.passed is True or row.error_kind == "worker", row
    assert any(row.passed for row in result.rows)


async def test_only_the_variables_the_workflow_names_travel_and_come_back_masked(
    ray_cluster: str, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-very-secret-987")
    monkeypatch.setenv("NOT_NAMED", "driver-only-value")
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
    text = (
        "workflow: env.yaml\ndataset: cases.jsonl\nscorers:\n"
        "  - {name: out, condition: 'transcript contains \"other=unset\"'}\n"
    )
    result = await evaluate(project, text, executor="ray", workers=1)
    (row,) = result.rows
    assert row.status == "completed", row
    run_dir = project.store.run_dir(row.run_id)
    files = "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    assert "other=unset" in files  # NOT_NAMED stayed on the driver
    assert "token=" in files and "tok-very-secret-987" not in files  # travelled, masked


async def test_without_ray_the_error_names_the_extra(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    path = project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
    )
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(UserError, match="needs Ray") as caught:
        prepare_eval(path, storage=project.store, executor="ray")
    assert "pip install 'awf-nb[ray]'" in str(caught.value.hint)
    with pytest.raises(UserError, match="options of --executor ray"):
        prepare_eval(path, storage=project.store, workers=2)


def test_no_ray_process_listens_on_a_non_loopback_address(ray_cluster: str) -> None:
    import psutil

    # the cluster's processes name its temp dir; the workers are their children; the
    # driver (this process) has Ray's servers too
    roots = [
        p for p in psutil.process_iter(["cmdline"])
        if any(CLUSTER["temp"] in part for part in p.info["cmdline"] or [])
    ]  # fmt: skip
    assert roots, "no Ray process found"
    processes = {p.pid: p for root in roots for p in [root, *root.children(recursive=True)]}
    processes[os.getpid()] = psutil.Process()
    listening = []
    for process in processes.values():
        try:
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for conn in connections:
            if conn.status == psutil.CONN_LISTEN:
                listening.append((process.pid, conn.laddr.ip, conn.laddr.port))
    assert listening, "the Ray processes listen nowhere?"
    outside = [entry for entry in listening if entry[1] not in ("127.0.0.1", "::1")]
    assert not outside, outside
