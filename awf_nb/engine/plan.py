"""`awf run --dry-run`: the resolved plan of a workflow, without executing anything.

Inputs are resolved and validated as for a real run; the run's `limits` are listed, then
each step in the order it can first be reached from `initial`, with what it would run —
for an agent step its provider, prompts, tools (which need `confirm`) and, for a
conversation, who answers (the person, a simulated user, another agent with its provider,
scripted replies), `until` and `max_turns`. Templates that only use inputs, env and
workflow data are rendered; those that need results of earlier steps are shown as written,
since those results do not exist yet.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.context import RunContext
from awf_nb.engine.events import SIMULATED_USER
from awf_nb.engine.inputs import resolve_inputs
from awf_nb.engine.state import RunState
from awf_nb.engine.summary import format_duration
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
from awf_nb.workflow.tools_model import ToolsConfig

if TYPE_CHECKING:
    from awf_nb.engine.partner import SimulatedUser


def one_line(text: str, limit: int = 80) -> str:
    """`text` on one line, cut to `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


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


def _show_in(
    show: Callable[[str | None, str, str], str], step: str, text: str | None, what: str
) -> str:
    return show(text, step, what)


def _limits(workflow: Workflow) -> str:
    limits = workflow.limits
    parts = []
    if limits.max_agent_turns is not None:
        parts.append(f"max_agent_turns {limits.max_agent_turns}")
    if limits.max_tokens is not None:
        parts.append(f"max_tokens {limits.max_tokens}")
    if limits.timeout is not None:
        parts.append(f"timeout {format_duration(limits.timeout)}")
    if limits.max_visits:
        visits = ", ".join(f"{step} {n}" for step, n in limits.max_visits.items())
        parts.append(f"max_visits {visits}")
    if not parts:
        parts.append("none (nothing bounds the agents' turns, tokens or time)")
    if "visits_kept" in limits.model_fields_set:
        parts.append(f"visits_kept {limits.visits_kept:,}")
    if "output_bytes_kept" in limits.model_fields_set:
        parts.append(f"output_bytes_kept {limits.output_bytes_kept:,}")
    return " · ".join(parts)


def _tools(tools: ToolsConfig | None, proxied: bool) -> list[str]:
    """What the model may call: built-ins, command tools, MCP servers; which need a yes."""
    if tools is None:
        return []
    offered = [*tools.builtin, *(c.name for c in tools.commands)]
    offered += [f"{m.name}_* (MCP server: {' '.join([m.command, *m.args])})" for m in tools.mcp]
    lines = [f"tools: {', '.join(offered) or 'none'}" + (" (served to the CLI)" if proxied else "")]
    if tools.confirm:
        lines.append(f"  confirm: {', '.join(tools.confirm)} (asked before each call)")
    lines.append(f"  max_rounds: {tools.max_rounds}")
    return lines


def _conversation(
    step: AgentStep, show: Callable[[str | None, str], str], user: SimulatedUser | None
) -> list[str]:
    """Who answers a conversation step's agent, and what ends the exchange."""
    config = step.conversation
    partner = config.partner if config is not None else None
    if partner is None:
        if user is not None:
            return [
                f"with: {SIMULATED_USER}, provider {user.provider} (playing you: "
                f"{one_line(user.persona)})",
                f"max_turns: {user.max_turns}",
            ]
        return ["with: you (the person), until you end it (an empty line, exit, quit)"]
    assert config is not None
    if partner.kind == "replies":
        count = len(partner.replies or [])
        lines = [f"with: {partner.name}, {count} scripted repl{'y' if count == 1 else 'ies'}"]
    elif partner.kind == "command":
        lines = [f"with: {partner.name}, command: {partner.command}"]  # rendered per reply
        if partner.timeout is not None:
            lines.append(f"  timeout: {format_duration(partner.timeout)} per answer")
    else:
        provider = show(partner.provider, "conversation.with.provider")
        lines = [f"with: {partner.name}, provider {provider}"]
        if partner.system_prompt:
            lines.append(
                f"  system: {show(partner.system_prompt, 'conversation.with.system_prompt')}"
            )
        if partner.prompt:
            lines.append(f"  prompt: {partner.prompt}")  # rendered for each reply ({{.reply}})
    if config.until:
        lines.append(f"until: {config.until}")
    lines.append(f"max_turns: {config.max_turns}")
    return lines


def describe_plan(
    workflow: Workflow,
    given: Mapping[str, Any],
    *,
    cwd: Path | None = None,
    user: SimulatedUser | None = None,
) -> str:
    """The plan as text. `user`: the simulated user that would play the person."""
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
    lines.append(f"limits: {_limits(workflow)}")
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
            if step.mode == "conversation":
                detail += _conversation(step, functools.partial(_show_in, show, name), user)
            proxied = step.mcp_proxy is not None and step.mcp_proxy.enable
            detail += _tools(step.tools, proxied)
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
