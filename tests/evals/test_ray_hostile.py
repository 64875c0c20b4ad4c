"""`--executor ray` against hostile input, without a cluster: what of the working directory
travels and how it lands on a worker, the secrets a work item carries, a worker's answer
that is not its work item's, and an address that accepts connections but never answers
as a Ray cluster (a listener on 127.0.0.1 only: no test reaches another address).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.partner import SimulatedUser
from awf_nb.evals import workdir
from awf_nb.evals.datasets import Case
from awf_nb.evals.executor import RunArtifacts, RunOutcome, RunStarted, WorkItem
from awf_nb.evals.results import EvalRow
from tests.support.cli import run_awf
from tests.support.eval_project import Project
from tests.support.peers import require_module


def test_secret_looking_files_do_not_travel_unless_listed(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for name in ("wf.yaml", "data/cases.jsonl", ".env", ".env.prod", "secrets/db.txt",
                 "keys/id_rsa", "tls/server.pem", "app.key", "conf/.netrc", "run.sh",
                 "storage/runs/x/state.json", ".git/config", "secrets/shared.txt"):  # fmt: skip
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to(tmp_path)  # could point at any file of the machine
    data = workdir.pack(root, [root / "storage"], workdir.listed_files(
        {"AWF_RAY_FILES": "app.key, secrets/shared.txt"}))  # fmt: skip
    target = tmp_path / "worker" / "work"
    workdir.unpack(data, target)
    sent = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert sent == ["app.key", "data/cases.jsonl", "run.sh", "secrets/shared.txt", "wf.yaml"]
    assert (target / "wf.yaml").stat().st_mode & 0o777 == 0o600
    assert (target / "run.sh").stat().st_mode & 0o777 == 0o700  # still runs
    assert target.stat().st_mode & 0o777 == 0o700
    assert (target / "data").stat().st_mode & 0o777 == 0o700


def test_a_killed_workers_folder_is_swept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    temp = Path(os.environ.get("TMPDIR", "/tmp"))
    dead = temp / f"{workdir.WORKER_PREFIX}{gone.stdout.strip()}-test"
    dead.mkdir()
    (dead / "left.txt").write_text("x")
    mine = workdir.worker_folder()  # this process: alive
    try:
        removed = workdir.sweep()
        assert dead in removed and not dead.exists()
        assert mine.is_dir()
    finally:
        for path in (dead, mine):
            if path.exists():
                for child in path.iterdir():
                    child.unlink()
                path.rmdir()


def test_a_work_item_carries_the_secrets_its_templates_took_from_the_environment() -> None:
    require_module("ray", "pip install 'awf-nb[ray]'")
    from awf_nb.evals.ray_executor import item_secrets

    env = {"MY_API_TOKEN": "tok-123456", "USER_KEY": "uk-abcdef", "MODEL": "qwen-model",
           "OTHER_SECRET": "not-used-here"}  # fmt: skip
    user = SimulatedUser(persona="p", provider="openai_compatible",
                         options={"api_key": "literal-key-99", "headers": {"X": "uk-abcdef"}})  # fmt: skip
    item = WorkItem(Case("a", {}), 1, {"q": "ask tok-123456", "m": "qwen-model"}, user)
    assert set(item_secrets(item, env)) == {"tok-123456", "uk-abcdef", "literal-key-99"}


class FakeActor:
    """A worker that answers a work item with the events given."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.run = self

    def options(self, **_: Any) -> FakeActor:
        return self

    def remote(self, _remote: Any) -> Any:
        async def stream() -> Any:
            for event in self.events:
                future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                future.set_result(event)
                yield future

        return stream()


def answered(events: list[Any]) -> list[Any]:
    require_module("ray", "pip install 'awf-nb[ray]'")
    from awf_nb.evals.ray_executor import RayExecutor

    executor = RayExecutor(None)
    item = WorkItem(Case("a", {}), 1)
    put: list[Any] = []
    asyncio.run(executor._one(FakeActor(events), item, put.append))
    return put


def test_a_workers_answer_that_is_not_its_items_is_an_error_row() -> None:
    from awf_nb.evals.ray_executor import RemoteOutcome

    other = EvalRow(case="not-in-the-eval", epoch=1)
    (row,) = [e.row for e in answered([RemoteOutcome(RunOutcome(other))])]
    assert (row.case, row.error_kind) == ("a", "worker")
    assert 'the row of case "not-in-the-eval"' in row.error
    (row,) = [e.row for e in answered(["not an outcome"])]
    assert row.error_kind == "worker" and "a str, not a run's outcome" in row.error
    mine = EvalRow(case="a", epoch=1, run_id="r1")
    bad = RunArtifacts("r1", b"{not json", b"", "")
    events = answered([RunStarted("a", 1, "r1"), RemoteOutcome(RunOutcome(mine, bad))])
    assert isinstance(events[0], RunStarted)
    assert events[1].row.error_kind == "worker" and "does not load" in events[1].row.error
    assert events[1].artifacts is None
    first, second = EvalRow(case="a", epoch=1), EvalRow(case="a", epoch=1, error="again")
    (good,) = answered([RemoteOutcome(RunOutcome(first)), RemoteOutcome(RunOutcome(second))])
    assert good.row.error_kind == "" and good.row.error == ""  # counted once


def test_a_loopback_address_stays_on_loopback() -> None:
    require_module("ray", "pip install 'awf-nb[ray]'")
    from ray._private.services import canonicalize_bootstrap_address

    from awf_nb.evals.ray_connect import _loopback_driver

    with _loopback_driver(True):  # no network: Ray only rewrites the string
        assert canonicalize_bootstrap_address("127.0.0.1:6390") == "127.0.0.1:6390"


@pytest.fixture
def silent_listener() -> Iterator[tuple[int, threading.Event]]:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            accepted.set()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        server.close()
        for conn in held:
            conn.close()


def test_an_address_that_never_answers_is_a_clear_error_and_leaves_no_eval(
    project: Project, silent_listener: tuple[int, threading.Event]
) -> None:
    require_module("ray", "pip install 'awf-nb[ray]'")
    port, _ = silent_listener
    project.rows("cases.jsonl", [{"id": "a", "topic": "x"}])
    project.write_eval('workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "x"}\n')
    address = f"127.0.0.1:{port}"
    completed = run_awf(
        "eval", "t.eval.yaml", "--executor", "ray", "--ray-address", address,
        "--storage", str(project.store.root), cwd=project.root,
        env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": None, "RAY_ADDRESS": None},
        timeout=120,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    assert f"cannot connect to the Ray cluster at {address}: it does not answer" in (
        completed.stderr
    )
    evals = project.store.root / "evals"
    assert not evals.exists() or not any(evals.iterdir())  # no "cancelled" eval left
