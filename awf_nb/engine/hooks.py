"""Hooks: the `hooks:` of a workflow (start, end, error, cancel) and of its steps (pre,
post). Each action logs a message (`log:`) or runs a shell command, whose output is shown
and whose failure is a warning, never the run's end."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from awf_nb.engine import events as ev
from awf_nb.engine.context import LoopFrame, command_env
from awf_nb.engine.process import run_shell
from awf_nb.errors import AwfError
from awf_nb.workflow.model import HookAction

if TYPE_CHECKING:
    from awf_nb.engine.runtime import StepRun

HOOK_TIMEOUT = 300.0  # seconds a hook's command may run


async def run_hooks(
    run: StepRun,
    actions: list[HookAction],
    *,
    step: str,
    loop: LoopFrame | None = None,
    error: Mapping[str, Any] | None = None,
) -> None:
    """Run `actions` in order (`step` is "" for the workflow's own hooks)."""
    for action in actions:
        where = f"hook of {step}" if step else "workflow hook"
        if action.log is not None:
            text = run.ctx.render(action.log, step=step or "hooks", what=where, error=error)
            run.send(ev.LogMessage, text, step)
            continue
        command = run.ctx.render(
            action.command or "", step=step or "hooks", what=where, loop=loop, error=error
        )
        result = await run_shell(
            command,
            cwd=run.config.cwd,
            env=command_env(run.config.env, run.ctx.inputs, AWF_RUN_ID=run.run_id),
            timeout=HOOK_TIMEOUT,
            keep=run.limits.limits.output_bytes_kept,
            around_cut=run.masker.around_cut,
        )
        if result.stdout.strip():
            run.send(ev.LogMessage, result.stdout.rstrip(), step)
        if result.exit_code != 0:
            run.warn(
                f"{where} exited with code {result.exit_code}: {result.stderr.strip()[-500:]}",
                step,
            )


async def run_error_hooks(run: StepRun) -> None:
    """The workflow's `workflow_error` hooks, with `.error` (message, state, exit code)."""
    if not run.workflow.hooks.workflow_error:
        return
    state = run.state
    failed = state.steps.get(state.current_step)
    error = {
        "Message": state.error,
        "State": state.current_step,
        "ExitCode": failed.exit_code if failed and failed.exit_code is not None else 0,
        "Type": "execution",
    }
    with contextlib.suppress(AwfError):
        await run_hooks(run, run.workflow.hooks.workflow_error, step="", error=error)
