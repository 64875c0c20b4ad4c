"""`%%awf eval` and `awf_nb.aevaluate` in a real ipykernel (6.29 and 7.4): the live table
fills in, the result is bound, the saved output holds the static table, a clicked row
shows its run's conversation in the run panel, and Stop cancels the runs in flight."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.support.kernels import KernelSession
from tests.support.waiting import wait_until

pytestmark = pytest.mark.kernel

CELL_SECONDS = 90.0

WORKFLOW = """\
name: chatty
inputs: [{name: topic, required: true}]
states:
  initial: chat
  chat:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Let us talk about {{.inputs.topic}}"
    options: {replies: ["first answer about {{.inputs.topic}}", "second answer"]}
    on_success: done
  done: {type: terminal}
"""

GATED = """\
name: gated
states:
  initial: wait
  wait:
    type: step
    command: 'until [ -f "gate-$AWF_EVAL_CASE" ]; do sleep 0.02; done'
    timeout: 120
    on_success: done
  done: {type: terminal}
"""

EVAL_CELL = """\
%%awf eval --out res
workflow: wf.yaml
dataset: cases.jsonl
inputs: {topic: "{{.case.topic}}"}
user:
  provider: scripted
  options: {replies: ["tell me more", "exit"]}
  persona: "a reader"
scorers:
  - name: yeast
    condition: 'transcript contains "yeast"'
"""


def prepare(kernel: KernelSession, workdir: Path) -> None:
    (workdir / "wf.yaml").write_text(WORKFLOW)
    rows = [{"id": "bread", "topic": "bread"}, {"id": "yeast", "topic": "yeast"}]
    (workdir / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def table(kernel: KernelSession):  # type: ignore[no-untyped-def]
    found = [w for w in kernel.widgets.values() if w.model_name == "AnyModel" and "rows" in w.state]
    assert len(found) == 1, kernel.describe()
    return found[0]


def outcomes(kernel: KernelSession) -> dict[str, str]:
    return {row["key"]: row["outcome"] for row in table(kernel).state["rows"]}


def test_an_eval_cell_fills_the_table_binds_the_result_and_saves_a_static_table(
    awf_kernel: KernelSession, tmp_path: Path
) -> None:
    prepare(awf_kernel, tmp_path)
    outcome = awf_kernel.execute(EVAL_CELL, timeout=CELL_SECONDS)
    assert outcome.status == "ok", outcome.reply["content"]
    # on ipykernel 6.29 the eval runs in the background (widget events reach it there)
    wait_until(lambda: awf_kernel.drain(0.2) or outcomes(awf_kernel) == {"bread/1": "fail", "yeast/1": "pass"},
               "both rows finished")  # fmt: skip
    row_cells = {row["key"]: row["cells"] for row in table(awf_kernel).state["rows"]}
    assert row_cells["bread/1"][:4] == ["bread", "1", "fail", "completed"]
    header = table(awf_kernel).state["header"]
    assert re.fullmatch(r"\d+\.\d\d s", row_cells["bread/1"][header.index("time")])
    assert table(awf_kernel).state["rows"][0]["key"] == "bread/1"  # failed rows first
    check = awf_kernel.execute(
        "_r = await res_task\nprint(_r.summary.passed, _r.summary.failed, res.eval_id == _r.eval_id)",
        timeout=CELL_SECONDS,
    )
    assert check.status == "ok", check.reply["content"]
    assert check.stdout.split() == ["1", "1", "True"]
    progress = " ".join(awf_kernel.texts("awf-eval-progress"))
    assert "2/2 runs" in progress and "completed" in progress
    # The live table gave way to its static copy (a new output, or in its place on 6.29),
    # each run's conversation folded under its row: the saved notebook reads offline.
    shown = [
        m for m in awf_kernel.iopub if m["msg_type"] in ("display_data", "update_display_data")
    ]
    static = [m["content"]["data"].get("text/html", "") for m in shown]
    (copy,) = [html for html in static if 'class="awf-eval-table"' in html]
    assert "awf-eval-fail" in copy and "<summary>conversation</summary>" in copy
    assert "first answer about bread" in copy
    assert not any("application/vnd.jupyter.widget-view+json" in m["content"]["data"]
                   for m in shown if m["msg_type"] == "update_display_data")  # fmt: skip

    # a click on a row shows that run's conversation, drawn by the run panel
    bread = next(r for r in table(awf_kernel).state["rows"] if r["key"] == "bread/1")
    awf_kernel.send_comm(
        table(awf_kernel).comm_id,
        {"method": "update", "state": {"selected": bread["run_id"]}, "buffer_paths": []},
    )
    awf_kernel.wait_for_text("awf-assistant", "first answer about bread")


def test_aevaluate_in_a_kernel_shows_the_table_too(
    awf_kernel: KernelSession, tmp_path: Path
) -> None:
    prepare(awf_kernel, tmp_path)
    code = textwrap.dedent(
        """
        import awf_nb
        res = await awf_nb.aevaluate(workflow="wf.yaml", dataset="cases.jsonl",
                                     inputs={"topic": "{{.case.topic}}"},
                                     scorers=[{"name": "ok", "condition": 'status == "completed"'}])
        print(res.summary.passed)
        """
    )
    outcome = awf_kernel.execute(code, timeout=CELL_SECONDS)
    assert outcome.status == "ok", outcome.reply["content"]
    assert outcome.stdout.split() == ["2"]
    assert outcomes(awf_kernel) == {"bread/1": "pass", "yeast/1": "pass"}


def test_stop_cancels_the_runs_in_flight_and_resume_finishes_them(
    awf_kernel: KernelSession, tmp_path: Path
) -> None:
    (tmp_path / "gated.yaml").write_text(GATED)
    (tmp_path / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{i}"}) + "\n" for i in range(4))
    )
    (tmp_path / "gate-c0").touch()
    cell = "%%awf eval --out res --concurrency 2\nworkflow: gated.yaml\ndataset: cases.jsonl\n"
    msg_id = awf_kernel.submit(cell)
    wait_until(
        lambda: awf_kernel.drain(0.2) or sorted(outcomes_or_empty(awf_kernel).values()) == ["pass", "running", "running"],
        "one run passed, two in flight",
    )  # fmt: skip
    awf_kernel.click(awf_kernel.button("Stop"))
    wait_until(
        lambda: awf_kernel.drain(0.2) or sorted(outcomes_or_empty(awf_kernel).values()) == ["cancelled", "cancelled", "pass"],
        "the runs in flight shown as cancelled",
    )  # fmt: skip
    awf_kernel.wait_for_cell(msg_id, CELL_SECONDS)
    progress = " ".join(awf_kernel.texts("awf-eval-progress"))
    assert "cancelled — finish it with" in progress
    eval_id = progress.split("%%awf eval --resume ")[1].split("<")[0]
    for i in range(4):
        (tmp_path / f"gate-c{i}").touch()
    resumed = awf_kernel.execute(
        f"%%awf eval --out again --resume {eval_id} --wait\n", timeout=CELL_SECONDS
    )
    assert resumed.status == "ok", resumed.reply["content"]
    check = awf_kernel.execute(
        "_a = again if not hasattr(again, 'done') else await again\n"
        "print(len(_a.rows), _a.status)", timeout=CELL_SECONDS,
    )  # fmt: skip
    assert check.stdout.split() == ["4", "completed"], check.reply["content"]


def outcomes_or_empty(kernel: KernelSession) -> dict[str, str]:
    found = [w for w in kernel.widgets.values() if w.model_name == "AnyModel" and "rows" in w.state]
    return {row["key"]: row["outcome"] for row in found[-1].state["rows"]} if found else {}
