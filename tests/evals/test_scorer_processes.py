"""A command scorer's background jobs (`nohup … &`, `setsid`, `( … &)`) end with it, as a
Bash tool call's do: nothing a scorer starts outlives its cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from awf_nb.evals.api import prepare_eval
from tests.support.eval_project import Project
from tests.support.processes import process_alive
from tests.support.waiting import until


@pytest.mark.parametrize("how", ["nohup", "setsid", ""])
async def test_a_command_scorers_background_jobs_end_with_it(project: Project, how: str) -> None:
    pids = project.root / "pids"
    job = f"sh -c 'echo $$ >> {pids}; exec sleep 300' >/dev/null 2>&1"
    start = f"( {job} & );" if not how else f"{how} {job} &"
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}])
    project.write("grader.sh", f"{start}\necho 1\n")
    path: Path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        scorers:
          - name: grader
            command: sh grader.sh
        """
    )
    result = await prepare_eval(path, storage=project.store).execute()
    value = result.rows[0].scores["grader"]
    assert value.error == "" and value.score == 1.0, value.error
    await until(pids.exists, "the job to start")
    started = [int(pid) for pid in pids.read_text().split()]
    await until(lambda: not any(process_alive(pid) for pid in started), "the job to be stopped")
