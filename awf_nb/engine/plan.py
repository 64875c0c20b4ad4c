"""`awf run --dry-run`: the resolved plan of a workflow, without executing anything.

Inputs are resolved and validated as for a real run; each step is listed in the order it
can first be reached from `initial`, with what it would run. Templates that only use
inputs, env and workflow data are rendered; those that need results of earlier steps are
shown as written, since those results do not exist yet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from awf_nb.engine.context import RunContext
from awf_nb.engine.inputs import resolve_inputs
from awf_nb.engine.state import RunState
from awf_nb.errors import ExecutionError
from awf_nb.safe_text import terminal_safe
from awf_nb.secrets import Masker
from awf_nb.workflow.checks import execution_order
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
    Workflow,
)


def reachable_order(workflow: Workflow) -> list[str]:
    """Step names in breadth-first order from `initial`, then the unreachable ones."""
    seen = execution_order(workflow)
    return [*seen, *(n for n in workflow.steps if n not in set(seen))]


def _routes(step: AnyStep) -> str:
    parts = []
    for transition in step.transitions:
        parts.append(
            f"when {transition.when} -> {transition.goto}"
            if transition.when
            else f"else -> {transition.goto}"
        )
    if isinstance(step, ForEachStep | WhileStep) and step.on_complete:
        parts.append(f"complete -> {step.on_complete}")
    if step.on_success:
        parts.append(f"success -> {step.on_success}")
    if isinstance(step.on_failure, str):
        parts.append(f"failure -> {step.on_failure}")
    elif step.on_failure is not None:
        parts.append(f"failure -> fail run: {step.on_failure.message!r}")
    return "; ".join(parts)


def describe_plan(workflow: Workflow, given: Mapping[str, Any], *, cwd: Path | None = None) -> str:
    inputs = resolve_inputs(workflow, given, cwd=cwd)
    env = dict(os.environ)
    masker = Masker.for_run(workflow, inputs, env)
    state = RunState(run_id="dry-run", workflow_name=workflow.name)
    ctx = RunContext(
        state=state,
        inputs=inputs,
        env=env,
        cwd=cwd or Path.cwd(),
        base_dir=workflow.base_dir,
    )

    def show(text: str | None, name: str, what: str) -> str:
        if not text:
            return ""
        try:
            return ctx.render(text, step=name, what=what)
        except ExecutionError:
            return text  # needs results of earlier steps

    lines = [f"workflow {workflow.name} (dry run: nothing is executed)"]
    if inputs:
        lines.append("inputs:")
        lines.extend(f"  {k} = {v!r}" for k, v in inputs.items())
    lines.append("steps:")
    for index, name in enumerate(reachable_order(workflow), 1):
        step = workflow.steps[name]
        lines.append(f"  {index}. {name} [{step.type}]")
        detail: list[str] = []
        if isinstance(step, CommandStep):
            detail.append(f"run: {show(step.command, name, 'command') or step.script_file}")
        elif isinstance(step, AgentStep):
            detail.append(f"provider: {show(step.provider, name, 'provider')} ({step.mode})")
            if step.system_prompt:
                detail.append(f"system: {show(step.system_prompt, name, 'system_prompt')}")
            detail.append(f"prompt: {show(step.prompt, name, 'prompt') or step.prompt_file}")
            if step.conversation and step.conversation.continue_from:
                detail.append(f"resumes: {step.conversation.continue_from}")
        elif isinstance(step, ParallelStep):
            detail.append(f"branches: {', '.join(step.parallel)} ({step.strategy})")
        elif isinstance(step, ForEachStep):
            items = step.items if isinstance(step.items, list) else show(step.items, name, "items")
            detail.append(f"for each of {items}: {', '.join(step.body)}")
        elif isinstance(step, WhileStep):
            detail.append(f"while {step.while_}: {', '.join(step.body)}")
        elif isinstance(step, CallWorkflowStep):
            detail.append(f"calls: {step.workflow}")
        elif isinstance(step, OperationStep):
            detail.append(f"operation: {step.operation}")
            for key, value in step.inputs.items():
                shown = show(value, name, f"inputs.{key}") if isinstance(value, str) else value
                detail.append(f"  {key}: {shown}")
        elif isinstance(step, TerminalStep):
            detail.append(f"ends the run: {step.status}")
        if routes := _routes(step):
            detail.append(routes)
        lines.extend(f"       {d}" for d in detail)
    # What a dry run prints is shown like everything else: secrets masked, and no control
    # character in a command or prompt can erase or rewrite what the person reviews.
    return terminal_safe(masker.mask("\n".join(lines)))
