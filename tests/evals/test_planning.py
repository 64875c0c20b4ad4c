"""Planning a big eval: refused beyond `max_runs` with a clear message; within it, the work
items are built one at a time as workers take them (the first run starts with a handful
built, not a million), and SIGTERM while a big eval starts cancels it (exit 130)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from awf_nb.errors import EXIT_CANCELLED, UserError
from awf_nb.evals.api import prepare_eval
from tests.support.eval_project import Project
from tests.support.waiting import wait_until

# Each run waits until the test lets it go (a file `gate`), so the eval stays started.
GATED = """\
name: gated
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f gate ]; do sleep 0.02; done; echo passed'
    timeout: 120
    on_success: done
  done: {type: terminal}
"""

CASES = 10_000
EPOCHS = 100  # 1,000,000 runs: the default max_runs exactly


def big_eval(project: Project, extra: str = "") -> None:
    project.write("gated.yaml", GATED)
    project.rows("cases.jsonl", [{"id": f"c{i}"} for i in range(CASES)])
    project.write_eval(
        f"workflow: gated.yaml\ndataset: cases.jsonl\nepochs: {EPOCHS}\nconcurrency: 2\n"
        f"inputs: {{}}\n{extra}"
    )


def test_an_eval_beyond_max_runs_is_refused_before_anything_is_written(
    project: Project,
) -> None:
    project.rows("cases.jsonl", [{"id": f"c{i}", "topic": "t"} for i in range(11)])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
        "max_runs: 20\nepochs: 2\n"
    )
    with pytest.raises(UserError) as caught:
        prepare_eval("t.eval.yaml", storage=project.store)
    assert "11 cases x 2 epochs is 22 runs, more than the 20 an eval may plan" in str(
        caught.value.message
    )
    assert "max_runs" in (caught.value.hint or "")
    assert not (project.store.root / "evals").exists()


def test_a_million_runs_start_with_only_the_items_taken_built(project: Project) -> None:
    big_eval(project)
    run = prepare_eval("t.eval.yaml", storage=project.store)
    assert run.total == CASES * EPOCHS

    class Progress:
        def __init__(self) -> None:
            self.started = asyncio.Event()

        def eval_started(self, run: object) -> None: ...

        def run_started(self, case: str, epoch: int, run_id: str) -> None:
            self.started.set()

        def run_finished(self, row: object) -> None: ...

        def eval_finished(self, result: object) -> None: ...

    async def main() -> int:
        progress = Progress()
        task = asyncio.create_task(run.execute(progress))
        await progress.started.wait()
        assert run.planned is not None
        built = run.planned.built
        assert len(run.planned) == CASES * EPOCHS
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return built

    built = asyncio.run(main())
    assert 1 <= built <= 2  # one per worker (concurrency 2), not the whole plan
    assert run.result().status == "cancelled"


def test_sigterm_while_a_big_eval_starts_cancels_it(project: Project) -> None:
    big_eval(project)
    command = [sys.executable, "-m", "awf_nb.cli", "eval", "t.eval.yaml", "--json",
               "--storage", str(project.store.root)]  # fmt: skip
    with subprocess.Popen(
        command, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as child:  # fmt: skip
        evals = project.store.root / "evals"

        def claimed() -> bool:
            for manifest in evals.glob("*/manifest.json"):
                try:
                    return json.loads(manifest.read_text()).get("status") == "running"
                except (OSError, ValueError):  # being replaced
                    return False
            return False

        wait_until(claimed, "the eval to be running", timeout=300)
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=300)
    assert child.returncode == EXIT_CANCELLED, err
    assert json.loads(out)["status"] == "cancelled"


def test_a_second_process_running_the_same_eval_is_refused_and_told_who_holds_it(
    project: Project,
) -> None:
    from awf_nb.evals.storage import EvalFolder

    project.rows("cases.jsonl", [{"id": "a", "topic": "t"}])
    project.write_eval(
        'workflow: wf.yaml\ndataset: cases.jsonl\ninputs: {topic: "{{.case.topic}}"}\n'
    )
    run = prepare_eval("t.eval.yaml", storage=project.store)
    run.folder.claim(run.manifest)  # this process runs it
    other = EvalFolder(project.store, run.eval_id)  # as a second `awf eval --resume` would
    with pytest.raises(UserError) as caught:
        other.lock()
    message = str(caught.value.message)
    assert f"eval {run.eval_id} is being run by process {os.getpid()} on " in message
    assert " since 20" in message
    run.folder.finish(run.manifest, "cancelled")
    other.lock()  # free again once the first is done
    other.unlock()
