"""Parallel, for_each, while, call_workflow, hooks, token totals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awf_nb.engine.events import LogMessage, RunWarning
from tests.support.events import Collect

pytestmark = pytest.mark.asyncio


PARALLEL = """
name: t
states:
  initial: fan
  fan:
    type: parallel
    parallel: [a, b, c]
    strategy: STRATEGY
    max_concurrent: MAX
    on_success: ok
    on_failure: ko
  a: {type: step, command: "sleep 0.3; echo A"}
  b: {type: step, command: "sleep 0.3; echo B"}
  c: {type: step, command: "CMD"}
  ok: {type: terminal, message: "{{.states.a.Output}}{{.states.b.Output}}"}
  ko: {type: terminal, status: failure, message: "{{.states.fan.Output}}"}
"""


def parallel(strategy: str, cmd: str = "echo C", max_concurrent: int = 0) -> str:
    return (
        PARALLEL.replace("STRATEGY", strategy)
        .replace("CMD", cmd)
        .replace("MAX", str(max_concurrent))
    )


async def test_parallel_runs_branches_concurrently(run_yaml, tmp_path):
    # Each branch waits until the other one has started: run one after the other, the
    # first would give up waiting and fail.
    marks = tmp_path / "marks"
    marks.mkdir()
    wait_for = "touch {m}/{me}; i=0; until [ -e {m}/{other} ]; do i=$((i+1)); [ $i -gt 600 ] && exit 7; sleep 0.05; done; echo {out}"
    text = PARALLEL.replace("STRATEGY", "all_succeed").replace("MAX", "0").replace("CMD", "echo C")
    text = text.replace(
        '"sleep 0.3; echo A"', repr(wait_for.format(m=marks, me="a", other="b", out="A"))
    )
    text = text.replace(
        '"sleep 0.3; echo B"', repr(wait_for.format(m=marks, me="b", other="a", out="B"))
    )
    result = await run_yaml(text)
    assert result.ok, result.error
    assert result.message == "AB"
    assert json.loads(result.outputs["fan"]) == {"a": "A", "b": "B", "c": "C"}


async def test_parallel_max_concurrent_serialises(run_yaml, tmp_path):
    log = tmp_path / "log"
    branch = "echo start-{0} >> {1}; sleep 0.1; echo end-{0} >> {1}; echo {2}"
    text = parallel("all_succeed", max_concurrent=1)
    text = text.replace('"sleep 0.3; echo A"', repr(branch.format("a", log, "A")))
    text = text.replace('"sleep 0.3; echo B"', repr(branch.format("b", log, "B")))
    text = text.replace('command: "echo C"', f"command: {branch.format('c', log, 'C')!r}")
    result = await run_yaml(text)
    assert result.ok, result.error
    lines = log.read_text().split()
    # One branch at a time: every start is followed by its own end.
    assert len(lines) == 6
    assert all(
        end == start.replace("start", "end")
        for start, end in zip(lines[::2], lines[1::2], strict=True)
    )


async def test_all_succeed_fails_fast(run_yaml):
    result = await run_yaml(parallel("all_succeed", cmd="exit 1"))
    assert result.status == "failed"
    assert result.steps["fan"].status == "failed"
    assert "branch failed: c" in result.steps["fan"].error
    assert result.steps["a"].status == "cancelled"


async def test_any_succeed_and_best_effort(run_yaml):
    result = await run_yaml(parallel("any_succeed", cmd="exit 1"))
    assert result.ok
    result = await run_yaml(parallel("best_effort", cmd="exit 1"))
    assert result.ok
    assert result.steps["c"].status == "failed"


async def test_any_succeed_all_failing(run_yaml):
    result = await run_yaml(
        PARALLEL.replace("STRATEGY", "any_succeed")
        .replace("MAX", "0")
        .replace("sleep 0.3; echo A", "exit 1")
        .replace("sleep 0.3; echo B", "exit 1")
        .replace("CMD", "exit 1")
    )
    assert result.status == "failed"
    assert "every branch failed" in result.steps["fan"].error


async def test_for_each_with_loop_data(run_yaml):
    result = await run_yaml(
        """
        name: t
        inputs: [{name: files, default: "a.go, b.go, c.go"}]
        states:
          initial: each
          each:
            type: for_each
            items: "{{.inputs.files}}"
            body: [show]
            on_complete: done
          show:
            type: step
            command: echo "{{.loop.Index1}}/{{.loop.Length}} {{.loop.Item}} first={{.loop.First}} last={{.loop.Last}}"
          done: {type: terminal}
        """
    )
    assert result.ok, result.error
    assert json.loads(result.outputs["each"]) == [
        "1/3 a.go first=true last=false",
        "2/3 b.go first=false last=false",
        "3/3 c.go first=false last=true",
    ]


async def test_for_each_json_list_yaml_list_and_break_when(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: each
          each:
            type: for_each
            items: ["x", "y", "stop", "z"]
            body: [show]
            break_when: "states.show.Output == 'stop'"
            on_success: json
          show: {type: step, command: "echo {{.loop.Item}}"}
          json:
            type: for_each
            items: '[1, 2]'
            body: [show2]
            on_success: done
          show2: {type: step, command: "echo n{{.loop.Item}}"}
          done: {type: terminal}
        """
    )
    assert json.loads(result.outputs["each"]) == ["x", "y", "stop"]
    assert json.loads(result.outputs["json"]) == ["n1", "n2"]


async def test_for_each_body_routing(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: each
          each:
            type: for_each
            items: ["ok", "skip", "exit", "never"]
            body: [check, work]
            on_success: done
          check:
            type: step
            command: echo {{.loop.Item}}
            transitions:
              - {when: "states.check.Output == 'skip'", goto: each}
              - {when: "states.check.Output == 'exit'", goto: escaped}
              - {goto: work}
          work: {type: step, command: "echo worked on {{.loop.Item}}"}
          escaped: {type: terminal, message: "escaped at {{.states.check.Output}}"}
          done: {type: terminal, message: done}
        """
    )
    assert result.message == "escaped at exit"
    assert result.outputs["work"] == "worked on ok"


async def test_while_loop_and_max_iterations(run_yaml, tmp_path):
    counter = tmp_path / "n"
    counter.write_text("0")
    result = await run_yaml(
        f"""
        name: t
        states:
          initial: loop
          loop:
            type: while
            while: "states.inc.Output == nil or int(states.inc.Output) < 3"
            body: [inc]
            max_iterations: 10
            on_success: done
          inc: {{type: step, command: 'n=$(($(cat {counter})+1)); echo $n > {counter}; echo $n'}}
          done: {{type: terminal, message: "{{{{.states.inc.Output}}}}"}}
        """
    )
    assert result.ok, result.error
    assert result.message == "3"

    result = await run_yaml(
        """
        name: t
        inputs: [{name: n, type: integer, default: 2}]
        states:
          initial: loop
          loop:
            type: while
            while: "true"
            body: [noop]
            max_iterations: "{{.inputs.n}} + 1"
            on_success: done
            on_failure: capped
          noop: {type: step, command: "true"}
          done: {type: terminal}
          capped: {type: terminal, status: failure, message: "{{.states.loop.Error}}"}
        """
    )
    assert result.status == "failed"
    assert "max_iterations (3) reached" in result.error


async def test_body_failure_fails_the_loop(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: each
          each: {type: for_each, items: [1, 2], body: [bad], on_success: done}
          bad: {type: step, command: "exit 1"}
          done: {type: terminal}
        """
    )
    assert result.status == "failed"
    assert "iteration 1" in result.error


async def test_call_workflow_inputs_outputs(run_yaml, workdir: Path):
    (workdir / "child.yaml").write_text(
        """
name: child
inputs: [{name: who}]
states:
  initial: greet
  greet: {type: step, command: "echo hi {{.inputs.who}}", on_success: done}
  done: {type: terminal, message: "child done"}
"""
    )
    result = await run_yaml(
        """
        name: parent
        states:
          initial: call
          call:
            type: call_workflow
            workflow: child
            inputs: {who: "{{.workflow.Name}}"}
            outputs: {greet: greeting}
            on_success: done
          done: {type: terminal, message: "{{.states.call.Response.greeting}}"}
        """
    )
    assert result.ok, result.error
    assert result.message == "hi parent"
    assert result.outputs["call"] == "child done"


async def test_call_workflow_keeps_the_estimate_marker_of_its_child_s_tokens(
    run_yaml, workdir: Path
):
    (workdir / "child.yaml").write_text(
        "name: child\nstates:\n  initial: a\n"
        '  a: {type: agent, provider: scripted, prompt: "one two", on_success: d}\n'
        "  d: {type: terminal}\n"
    )
    result = await run_yaml(
        """
        name: parent
        states:
          initial: call
          call: {type: call_workflow, workflow: child, on_success: done}
          done: {type: terminal}
        """
    )
    assert result.ok, result.error
    call = result.steps["call"]
    assert call.tokens_used > 0
    assert call.tokens_estimated  # the scripted provider's tokens are estimates: `~` shown


async def test_call_workflow_cycle_is_an_error(run_yaml, workdir: Path):
    (workdir / "a.yaml").write_text(
        "name: a\nstates:\n  initial: c\n  c: {type: call_workflow, workflow: b, on_success: d}\n"
        "  d: {type: terminal}\n"
    )
    (workdir / "b.yaml").write_text(
        "name: b\nstates:\n  initial: c\n  c: {type: call_workflow, workflow: a, on_success: d}\n"
        "  d: {type: terminal}\n"
    )
    result = await run_yaml(
        "name: top\nstates:\n  initial: c\n  c: {type: call_workflow, workflow: a, on_success: d}\n"
        "  d: {type: terminal}\n"
    )
    assert result.status == "failed"
    assert "call_workflow cycle: " in result.error
    assert "a -> b -> a" in result.error


async def test_hooks_run_and_log(run_yaml, tmp_path):
    trace = tmp_path / "trace"
    sink = Collect()
    result = await run_yaml(
        f"""
        name: t
        hooks:
          workflow_start: [{{log: "starting {{{{.workflow.Name}}}}"}}]
          workflow_end: [{{command: "echo end >> {trace}"}}]
        states:
          initial: a
          a:
            type: step
            command: "echo body >> {trace}"
            hooks:
              pre: [{{command: "echo pre >> {trace}"}}]
              post: [{{command: "echo post >> {trace}"}}, {{command: "exit 3"}}]
            on_success: ok
          ok: {{type: terminal}}
        """,
        sink=sink,
    )
    assert result.ok
    assert trace.read_text().split() == ["pre", "body", "post", "end"]
    assert next(m.message for m in sink.of(LogMessage)) == "starting t"
    assert any("exited with code 3" in w.message for w in sink.of(RunWarning))


async def test_workflow_error_hook_sees_error(run_yaml, tmp_path):
    trace = tmp_path / "trace"
    result = await run_yaml(
        f"""
        name: t
        hooks:
          workflow_error: [{{command: "echo '{{{{.error.Message}}}}' > {trace}"}}]
        states:
          initial: a
          a: {{type: step, command: "exit 4", on_success: ok}}
          ok: {{type: terminal}}
        """
    )
    assert result.status == "failed"
    assert trace.read_text().strip() == "step a: exit code 4"


async def test_token_totals(run_yaml):
    result = await run_yaml(
        """
        name: t
        states:
          initial: a
          a: {type: agent, provider: scripted, prompt: "one two three", on_success: b}
          b: {type: agent, provider: scripted, prompt: "four five", on_success: ok}
          ok: {type: terminal}
        """
    )
    assert result.tokens == result.steps["a"].tokens_used + result.steps["b"].tokens_used > 0


async def test_parallel_tokens_are_counted_once_in_the_run_total(run_yaml):
    text = """
name: t
states:
  initial: fan
  fan: {type: parallel, parallel: [a, b], on_success: done}
  a: {type: agent, provider: scripted, prompt: "one two three four", on_success: done}
  b: {type: agent, provider: scripted, prompt: "five six seven eight", on_success: done}
  done: {type: terminal}
"""
    result = await run_yaml(text)
    assert result.ok, result.error
    branches = result.steps["a"].tokens_used + result.steps["b"].tokens_used
    assert branches > 0
    assert result.steps["fan"].tokens_used == branches  # the step shows its branches' sum
    assert result.tokens == branches  # the run counts them once
