"""One function per step kind: command, agent, parallel, for_each/while, call_workflow,
operation.

Each executor fills the step's `StepState` (status, output, tokens, …) and raises an
`AwfError` on failure; `Runner.run_step` records the error and routes. Loop executors may
return the name of a step outside the loop that a body step routed to (the loop exits
there). Terminal steps are handled by the runner itself: they end the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine import events as ev
from awf_nb.engine.agent_step import execute_agent
from awf_nb.engine.branches import in_parallel_branch
from awf_nb.engine.context import LoopFrame, command_env, json_response
from awf_nb.engine.operations import OperationContext, run_operation
from awf_nb.engine.process import default_shell, run_process
from awf_nb.engine.runtime import MAX_CALL_DEPTH, RunEnds
from awf_nb.engine.state import StepState
from awf_nb.engine.summary import format_limit
from awf_nb.errors import DefinitionError, ExecutionError
from awf_nb.workflow.model import (
    AgentStep,
    AnyStep,
    CallWorkflowStep,
    CommandStep,
    ForEachStep,
    OperationStep,
    ParallelStep,
    TerminalStep,
    WhileStep,
)

if TYPE_CHECKING:
    from awf_nb.engine.runtime import StepRun

HARD_MAX_ITERATIONS = 10_000
DEFAULT_MAX_ITERATIONS = 100


async def execute(run: StepRun, step: AnyStep, st: StepState, loop: LoopFrame | None) -> str | None:
    plan = run.state.resume_inside
    if plan and plan.get("step") == step.name and "output" in plan:
        # A fork that gave this step its output (edited): it is not run again.
        st.output = str(_resume_inside(run, step.name)["output"])
        return None
    if isinstance(step, CommandStep):
        await execute_command(run, step, st, loop)
    elif isinstance(step, AgentStep):
        await execute_agent(run, step, st, loop)
    elif isinstance(step, ParallelStep):
        await execute_parallel(run, step, st, loop)
    elif isinstance(step, ForEachStep | WhileStep):
        return await execute_loop(run, step, st, loop)
    elif isinstance(step, CallWorkflowStep):
        await execute_call(run, step, st, loop)
    elif isinstance(step, OperationStep):
        await execute_operation(run, step, st, loop)
    else:  # a terminal reached as a parallel branch or loop body: nothing to run
        st.status = "completed"
    return None


# --- command ---------------------------------------------------------------------------------


async def execute_command(
    run: StepRun, step: CommandStep, st: StepState, loop: LoopFrame | None
) -> None:
    ctx = run.ctx
    cwd = run.config.cwd
    if step.dir:
        cwd = (cwd / Path(ctx.render(step.dir, step=step.name, what="dir", loop=loop))).resolve()
        if not cwd.is_dir():
            raise ExecutionError(f"step {step.name}: dir does not exist: {cwd}", step=step.name)
    env = command_env(run.config.env, ctx.inputs, AWF_RUN_ID=run.run_id, AWF_STEP=step.name)
    script_path: Path | None = None
    if step.script_file:
        argv, script_path = _script_argv(run, step, loop)
    else:
        command = run.edited_input(step.name)
        if command is None:
            command = ctx.render(step.command or "", step=step.name, what="command", loop=loop)
        argv = [default_shell(), "-c", command]
    stdout_masker = run.masker.stream()
    stderr_masker = run.masker.stream()

    def on_stdout(text: str) -> None:
        if shown := stdout_masker.feed(text):
            run.send(ev.StepOutput, step.name, shown, "stdout")

    def on_stderr(text: str) -> None:
        if shown := stderr_masker.feed(text):
            run.send(ev.StepOutput, step.name, shown, "stderr")

    def on_start(pgid: int) -> None:
        st.process_group = pgid
        run.checkpoint()  # saved before the wait: a kill -9 now leaves a trace to clean up

    try:
        result = await run_process(
            argv,
            cwd=cwd,
            env=env,
            timeout=step.timeout,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            on_start=on_start,
            keep=run.limits.limits.output_bytes_kept,
            around_cut=run.masker.around_cut,
        )
    except OSError as exc:
        raise ExecutionError(f"step {step.name}: cannot start command: {exc}") from None
    finally:
        st.process_group = 0
        if script_path is not None:
            script_path.unlink(missing_ok=True)
    for masker, stream in ((stdout_masker, "stdout"), (stderr_masker, "stderr")):
        if tail := masker.flush():
            run.send(ev.StepOutput, step.name, tail, stream)
    for stream, cut in (("stdout", result.stdout_cut), ("stderr", result.stderr_cut)):
        if cut:
            run.warn(
                f"step {step.name}: its {stream} was longer than "
                f"{run.limits.limits.output_bytes_kept:,} bytes; its beginning and end are "
                f"kept, {cut:,} bytes between them are not (limits.output_bytes_kept)",
                step.name,
            )
    st.output = run.masker.mask(result.stdout.rstrip("\n"))
    st.stderr = run.masker.mask(result.stderr.rstrip("\n"))
    st.exit_code = result.exit_code
    st.response = json_response(st.output)
    if result.timed_out:
        raise ExecutionError(f"step {step.name}: timed out after {format_limit(step.timeout)}")
    if result.exit_code != 0:
        last = st.stderr.strip().splitlines()[-1:] or [""]
        detail = f": {last[0]}" if last[0] else ""
        raise ExecutionError(f"step {step.name}: exit code {result.exit_code}{detail}")


def _script_argv(
    run: StepRun, step: CommandStep, loop: LoopFrame | None
) -> tuple[list[str], Path | None]:
    """A `script_file`: rendered as a template, then run by its shebang or by the shell."""
    path, body = run.ctx.render_file(
        step.script_file or "", step=step.name, what="script_file", loop=loop
    )
    if not body.startswith("#!"):
        return [default_shell(), "-c", body], None
    fd, tmp = tempfile.mkstemp(prefix="awf-script-", suffix=path.suffix)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
    os.chmod(tmp, stat.S_IRWXU)
    return [tmp], Path(tmp)


def _resume_inside(run: StepRun, step: str) -> dict[str, Any]:
    """What a fork made inside this step left for it (runs/fork.py), taken once; {} when
    there is none."""
    plan = run.state.resume_inside
    if not plan or plan.get("step") != step:
        return {}
    run.state.resume_inside = None
    return plan


# --- parallel --------------------------------------------------------------------------------


async def execute_parallel(
    run: StepRun, step: ParallelStep, st: StepState, loop: LoopFrame | None
) -> None:
    """Run the branches concurrently; branch routing is ignored (spec §4)."""
    limit = asyncio.Semaphore(step.max_concurrent or len(step.parallel) or 1)
    kept = set(_resume_inside(run, step.name).get("keep", ()))  # a fork in one branch
    branches = [run.workflow.steps[name] for name in step.parallel if name not in kept]

    async def branch(child: AnyStep) -> StepState:
        in_parallel_branch.set(step.name)  # this branch's task only: it has its own context
        async with limit:
            return (await run.run_step(child, loop)).state

    tasks = [asyncio.create_task(branch(child), name=child.name) for child in branches]
    failed: list[StepState] = []
    succeeded: list[StepState] = []
    try:
        for done in asyncio.as_completed(tasks):
            result = await done
            (succeeded if result.status == "completed" else failed).append(result)
            if failed and step.strategy == "all_succeed":
                break  # fail fast: the remaining branches are cancelled below
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    outputs = {
        name: run.state.steps[name].output for name in step.parallel if name in run.state.steps
    }
    st.output = json.dumps(outputs)
    st.response = outputs
    st.tokens_used = sum(run.state.steps[n].tokens_used for n in outputs)
    st.sums_branches = True
    names = ", ".join(f.name for f in failed)
    if step.strategy == "all_succeed" and failed:
        raise ExecutionError(f"step {step.name}: branch failed: {names} ({failed[0].error})")
    if step.strategy == "any_succeed" and not succeeded:
        raise ExecutionError(f"step {step.name}: every branch failed: {names}")


# --- loops -----------------------------------------------------------------------------------


def _max_iterations(run: StepRun, step: ForEachStep | WhileStep, loop: LoopFrame | None) -> int:
    value = step.max_iterations
    if isinstance(value, str):
        text = run.ctx.render(value, step=step.name, what="max_iterations", loop=loop)
        try:
            value = int(
                float(run.ctx.evaluate(text, step=step.name, what="max_iterations", loop=loop))
            )
        except (TypeError, ValueError):
            raise ExecutionError(
                f"step {step.name}: max_iterations {text!r} is not a number"
            ) from None
    if value == 0:  # as in AWF: 0 means "the default"
        value = DEFAULT_MAX_ITERATIONS
    if value < 0:
        raise ExecutionError(f"step {step.name}: max_iterations must not be negative")
    return min(value, HARD_MAX_ITERATIONS)


def _items(run: StepRun, step: ForEachStep, loop: LoopFrame | None) -> list[Any]:
    if isinstance(step.items, list):
        return [
            run.ctx.render_value(i, step=step.name, what="items", loop=loop) for i in step.items
        ]
    text = run.ctx.render(step.items, step=step.name, what="items", loop=loop).strip()
    if not text:
        return []
    with contextlib.suppress(ValueError):
        parsed = json.loads(text)
        if isinstance(parsed, list):
            return parsed
    return [part.strip() for part in text.split(",") if part.strip()]


async def execute_loop(
    run: StepRun, step: ForEachStep | WhileStep, st: StepState, parent: LoopFrame | None
) -> str | None:
    limit = _max_iterations(run, step, parent)
    items = _items(run, step, parent) if isinstance(step, ForEachStep) else None
    if items is not None and len(items) > limit:
        raise ExecutionError(
            f"step {step.name}: {len(items)} items exceed max_iterations ({limit})"
        )
    results: list[str] = []
    index = 0
    if resume := _resume_inside(run, step.name):  # a fork at one of its iterations
        results = [str(r) for r in resume.get("results", [])]
        index = len(results)
    while True:
        if items is not None:
            if index >= len(items):
                break
            frame = LoopFrame(items[index], index, len(items), parent)
        else:
            assert isinstance(step, WhileStep)  # no items: a while loop
            frame = LoopFrame(None, index, None, parent)
            if not run.ctx.condition(step.while_, step=step.name, what="while", loop=frame):
                break
            if index >= limit:
                raise ExecutionError(f"step {step.name}: max_iterations ({limit}) reached")
        exit_to, last = await _run_body(run, step, frame)
        results.append(last.output if last else "")
        index += 1
        if exit_to is not None:
            st.output = json.dumps(results)
            return exit_to
        if step.break_when and run.ctx.condition(
            step.break_when, step=step.name, what="break_when", loop=frame
        ):
            break
    st.output = json.dumps(results)
    st.response = results
    return None


async def _run_body(
    run: StepRun, loop_step: ForEachStep | WhileStep, frame: LoopFrame
) -> tuple[str | None, StepState | None]:
    """One iteration. Returns (a step outside the loop to jump to, the last body state)."""
    body = loop_step.body
    position = 0
    last: StepState | None = None
    while position < len(body):
        step = run.workflow.steps[body[position]]
        if isinstance(step, TerminalStep):
            return step.name, last
        outcome = await run.run_step(step, frame)
        last = outcome.state
        target = outcome.jump
        if target is None:
            has_route = bool(step.transitions or step.on_success or step.on_failure)
            if last.status == "completed" and not has_route:
                position += 1
                continue
            try:
                target = run.route(step, last, frame)
            except RunEnds as exc:
                raise ExecutionError(
                    f"step {loop_step.name}: iteration {frame.index + 1}: {exc.message}"
                ) from None
        if target == loop_step.name:
            return None, last  # next iteration
        if target in body:
            position = body.index(target)
            continue
        return target, last
    return None, last


# --- call_workflow ---------------------------------------------------------------------------


async def execute_call(
    run: StepRun, step: CallWorkflowStep, st: StepState, loop: LoopFrame | None
) -> None:
    config = run.config
    if config.depth + 1 > MAX_CALL_DEPTH:
        raise ExecutionError(
            f"step {step.name}: call_workflow depth limit ({MAX_CALL_DEPTH}) exceeded"
        )
    if config.load_child is None:
        raise ExecutionError(f"step {step.name}: call_workflow is not available here")
    name = run.ctx.render(step.workflow, step=step.name, what="workflow", loop=loop)
    try:
        child = config.load_child(name, run.workflow.base_dir)
    except DefinitionError as exc:
        raise ExecutionError(f"step {step.name}: workflow {name!r} is invalid:\n{exc}") from None
    key = str(child.source_path or child.name)
    stack = (*config.call_stack, str(run.workflow.source_path or run.workflow.name))
    if key in stack:
        chain = " -> ".join(Path(p).stem for p in (*stack, key))
        raise ExecutionError(f"step {step.name}: call_workflow cycle: {chain}")
    inputs = {
        k: run.ctx.render_value(v, step=step.name, what=f"inputs.{k}", loop=loop)
        for k, v in step.inputs.items()
    }
    from awf_nb.engine.inputs import resolve_inputs

    resolved = resolve_inputs(child, inputs, cwd=config.cwd)
    forked = _resume_inside(run, step.name)  # a fork inside the child: go on with it
    resume = (str(forked["child"]), str(forked["from"])) if forked.get("child") else None
    try:
        called = run.call_workflow(child, resolved, step=step.name, stack=stack, resume=resume)
        child_state = await asyncio.wait_for(called, step.timeout)
    except TimeoutError:
        raise ExecutionError(
            f"step {step.name}: timed out after {format_limit(step.timeout)}"
        ) from None
    st.tokens_used = child_state.total_tokens
    # an estimate anywhere in the child makes its total one (the `~` marker is kept)
    st.tokens_estimated = any(s.tokens_estimated for s in child_state.steps.values())
    outputs: dict[str, Any] = {}
    for child_step, parent_key in step.outputs.items():
        if child_step in child_state.steps:
            outputs[parent_key] = child_state.steps[child_step].output
    st.response = outputs or {n: s.output for n, s in child_state.steps.items()}
    st.output = child_state.message or json.dumps(outputs)
    if child_state.status != "completed":
        raise ExecutionError(
            f"step {step.name}: workflow {child.name} failed: {child_state.error}",
            step=step.name,
        )


# --- operation -------------------------------------------------------------------------------


async def execute_operation(
    run: StepRun, step: OperationStep, st: StepState, loop: LoopFrame | None
) -> None:
    """A built-in operation: its outputs become `Response`, and `Output` as JSON."""
    inputs = {
        k: run.ctx.render_value(v, step=step.name, what=f"inputs.{k}", loop=loop)
        for k, v in step.inputs.items()
    }
    context = OperationContext(
        env=run.config.env,
        cwd=run.config.cwd,
        workflow=run.workflow.name,
        run_id=run.run_id,
        step=step.name,
    )
    try:
        operation = run_operation(step.operation, inputs, context)
        result = await asyncio.wait_for(operation, step.timeout)
    except TimeoutError:
        raise ExecutionError(
            f"step {step.name}: timed out after {format_limit(step.timeout)}"
        ) from None
    except ExecutionError as exc:
        raise ExecutionError(f"step {step.name}: {run.masker.mask(exc.message)}") from None
    st.response = run.masker.mask_data(result.outputs)
    st.output = json.dumps(st.response, ensure_ascii=False)
    st.exit_code = 1 if result.error else 0
    if result.error:
        raise ExecutionError(f"step {step.name}: {run.masker.mask(result.error)}")
