"""An eval bounds the tool processes alive at once across all its runs
(`limits.max_tool_processes`): Bash tool calls and command scorers beyond the bound wait for
a slot, they are not refused; the runs all finish."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from awf_nb.engine.tool_slots import ToolProcessBound, default_tool_processes
from awf_nb.evals import executor
from awf_nb.evals.api import prepare_eval
from awf_nb.evals.executor import EvalPlan
from tests.support.eval_project import Project
from tests.support.waiting import until


def tool_workflow(call: str) -> str:
    """One agent reply asking for two Bash calls at once, each running `call`."""
    calls = json.dumps([{"name": "Bash", "arguments": {"command": call}}] * 2)
    return f"""\
name: tooly
states:
  initial: work
  work:
    type: agent
    provider: scripted
    prompt: go
    options:
      replies:
        - {{tool_calls: {calls}}}
        - done
    tools: {{builtin: [Bash]}}
    on_success: done
  done: {{type: terminal}}
"""


async def test_an_eval_never_has_more_tool_processes_alive_than_its_bound(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks, seen, gate = project.root / "marks", project.root / "seen", project.root / "gate"
    marks.mkdir()
    # Each process marks itself alive, writes down how many are alive, and holds on until
    # the gate opens (its marker removed before it ends, so the markers never overcount).
    held = (
        f"touch {marks}/live.$$; ls {marks} | wc -l >> {seen}; "
        f"until [ -f {gate} ]; do sleep 0.02; done; rm {marks}/live.$$"
    )
    project.write("tooly.yaml", tool_workflow(held))
    project.write("grade.sh", f"touch {marks}/live.$$; ls {marks} | wc -l >> {seen}; "
                  f"rm {marks}/live.$$; echo 1\n")  # fmt: skip
    project.rows("cases.jsonl", [{"id": f"c{i}"} for i in range(3)])
    path = project.write_eval(
        "workflow: tooly.yaml\ndataset: cases.jsonl\nconcurrency: 3\nyes: true\n"
        "limits: {max_tool_processes: 2}\n"
        "scorers: [{name: graded, command: sh grade.sh}]\n"
    )
    made: list[ToolProcessBound] = []
    real = executor.tool_process_bound

    def spy(plan: EvalPlan) -> ToolProcessBound:
        made.append(real(plan))
        return made[-1]

    monkeypatch.setattr(executor, "tool_process_bound", spy)

    task = asyncio.create_task(prepare_eval(path, storage=project.store).execute())
    try:
        await until(lambda: bool(made), "the eval's bound")
        bound = made[0]
        assert bound.limit == 2
        # all six calls are accounted for: two hold a process, four wait for a slot
        await until(
            lambda: bound.running == 2 and bound.waiting == 4 and len(list(marks.iterdir())) == 2,
            "six calls at the bound: two running, four waiting",
        )
    except BaseException:
        gate.touch()  # the held processes end, and the eval with them
        await asyncio.wait({task}, timeout=60)
        raise
    gate.touch()
    result = await task
    assert [row.scores["graded"].passed for row in result.rows] == [True] * 3
    counts = [int(line) for line in seen.read_text().split()]
    assert len(counts) == 9  # six Bash calls, three scorers
    assert max(counts) <= 2 and bound.most == 2


def test_the_default_bound_is_twice_the_cpus_at_least_four() -> None:
    assert default_tool_processes() == max(4, 2 * (os.cpu_count() or 1))
    with pytest.raises(ValueError, match="at least 1"):
        ToolProcessBound(0)
