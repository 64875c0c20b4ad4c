"""An agent step: what it sends (prompt, system prompt, options rendered), which
conversation it starts from (its own restored by resume, an earlier visit's when a cycle
comes back, or another step's through `continue_from`), its tools (started with the step,
or served to an agent CLI through `mcp_proxy`), then one turn or a conversation.

The step's `role:` (an AGENTS.md) goes before its system prompt, its `skills:` (SKILL.md
blocks) before its prompt — in a conversation, before the first message of each visit
(workflow/roles_skills.py finds and reads them). The turns themselves are
`AgentSession`'s (agent.py). Every process group the step starts — its tool calls, MCP
servers, an agent CLI — is recorded in its state while it runs (`StepChildren`), so
`awf resume` can stop what a killed run left behind.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from awf_nb.engine.agent import AgentSession
from awf_nb.engine.agent_files import with_role, with_skills
from awf_nb.engine.context import LoopFrame, command_env, strip_fences
from awf_nb.engine.conversation import converse
from awf_nb.engine.partner import make_exchange
from awf_nb.engine.ports import McpServerSpec, Provider, ToolSet
from awf_nb.engine.process import ChildGroup, watching
from awf_nb.engine.state import ChildGroupState, ConversationState, StepState
from awf_nb.errors import ExecutionError
from awf_nb.workflow.model import AgentStep

if TYPE_CHECKING:
    from awf_nb.engine.runtime import StepRun


class StepChildren:
    """The process groups of an agent step, kept in its state while they run (a
    `ProcessWatcher`): saved as each starts, so a kill -9 of awf leaves a trace."""

    def __init__(self, run: StepRun, st: StepState) -> None:
        self.run = run
        self.st = st

    def started(self, group: ChildGroup) -> None:
        self.st.process_groups.append(ChildGroupState(pgid=group.pgid, tag=group.tag))
        self.run.checkpoint()

    def ended(self, group: ChildGroup) -> None:
        # Saved with the next checkpoint: a group recorded after it ended is only looked
        # for again by a resume, and found gone.
        self.st.process_groups = [g for g in self.st.process_groups if g.pgid != group.pgid]


async def execute_agent(
    run: StepRun, step: AgentStep, st: StepState, loop: LoopFrame | None
) -> None:
    with watching(StepChildren(run, st)):
        await _execute_agent(run, step, st, loop)


async def _execute_agent(
    run: StepRun, step: AgentStep, st: StepState, loop: LoopFrame | None
) -> None:
    ctx, name = run.ctx, step.name
    provider_name = ctx.render(step.provider, step=name, what="provider", loop=loop).strip()
    provider = run.provider(provider_name)
    edited = run.edited_input(name)  # the prompt as edited at a breakpoint
    if edited is not None:
        prompt = edited
    elif step.prompt_file:
        _, prompt = ctx.render_file(step.prompt_file, step=name, what="prompt_file", loop=loop)
    else:
        prompt = ctx.render(step.prompt or "", step=name, what="prompt", loop=loop)
    if not prompt.strip():
        raise ExecutionError(
            f"step {name}: the prompt is empty after rendering; an agent step needs a "
            "first message (check the inputs and states it uses)",
            step=name,
        )
    prompt = await with_skills(run, step, prompt)
    system = (
        ctx.render(step.system_prompt, step=name, what="system_prompt", loop=loop)
        if step.system_prompt
        else None
    )
    system = with_role(run, name, step.role, system, what="role", loop=loop)
    options = ctx.render_value(step.options, step=name, what="options", loop=loop)
    run.masker.add_option_secrets(options)  # rendered: `api_key: "{{.env.MY_KEY}}"`
    restored = st.conversation if step.mode == "conversation" else None
    conversation, inherited = _conversation_for(run, step, provider_name, provider, restored)
    st.conversation = conversation
    tools = await _tools_for(run, step, provider_name, provider)
    session = AgentSession(
        run, step, st, provider_name, provider, system, options, conversation, inherited,
        tools=tools, mcp_servers=_proxied_tools(run, step, provider),
    )  # fmt: skip
    try:
        if tools is not None:
            session.repair_tool_calls()
        if step.mode == "conversation":
            exchange = make_exchange(run, session, loop)
            await converse(session, prompt, exchange, resuming=restored is not None)
        else:
            await session.turn(prompt)
    finally:
        if conversation is not None:
            conversation.live_from = None  # the step's checkpoint now holds every turn
        if tools is not None:
            await tools.aclose()
    if step.output_format == "json":
        try:
            st.json_ = json.loads(strip_fences(st.output))
        except ValueError as exc:
            raise ExecutionError(
                f"step {name}: output_format is json but the reply is not valid JSON ({exc})"
            ) from None
        if isinstance(st.json_, dict):
            st.response = st.json_


async def _tools_for(
    run: StepRun, step: AgentStep, provider_name: str, provider: Provider
) -> ToolSet | None:
    """The step's tools, started (MCP servers running), or None when it has none."""
    if step.tools is None or provider.session_kind == "session_id":
        return None  # an agent CLI runs tools itself: the step's are served to it (mcp_proxy)
    factory = run.config.toolsets
    if factory is None:
        raise ExecutionError(f"step {step.name}: this run cannot start tools", step=step.name)
    env = command_env(run.config.env, run.ctx.inputs, AWF_RUN_ID=run.run_id)

    def warn(message: str) -> None:  # a tool source misbehaving (already masked)
        run.warn(message, step.name)

    return await factory(step.tools, run.config.cwd, env, run.masker, warn)


def _proxied_tools(run: StepRun, step: AgentStep, provider: Provider) -> list[McpServerSpec]:
    """For an agent CLI with `mcp_proxy: {enable: true}`: the MCP server (`awf mcp-serve`)
    that serves it the step's tools."""
    proxy = step.mcp_proxy
    if provider.session_kind != "session_id" or proxy is None or not proxy.enable:
        if step.tools is not None and provider.session_kind == "session_id":
            raise ExecutionError(
                f"step {step.name}: an agent CLI runs its own tools; to give it this step's "
                "`tools:`, add `mcp_proxy: {enable: true}`",
                step=step.name,
            )
        return []
    factory = run.config.mcp_proxy
    if factory is None:
        raise ExecutionError(f"step {step.name}: this run cannot serve tools", step=step.name)
    env = command_env(run.config.env, run.ctx.inputs, AWF_RUN_ID=run.run_id)
    # Its config file holds the environment: it goes in the run's private folder, where a
    # crash leaves it private (and the next run of the step, a resume, cleans it up).
    store = run.config.store
    private = store.run_dir(run.run_id) if store is not None else None
    return [factory(step.tools, proxy, run.config.cwd, env, run.config.yes, private)]


def _conversation_for(
    run: StepRun,
    step: AgentStep,
    provider_name: str,
    provider: Provider,
    restored: ConversationState | None,
) -> tuple[ConversationState | None, int]:
    """The conversation state the step starts with, and how many replies it inherited."""
    source = step.conversation.continue_from if step.conversation else None
    inherited = 0
    if source:
        prev = run.state.steps.get(source)
        if prev is None or prev.status == "pending" or source not in run.state.executed:
            raise ExecutionError(f'continue_from: step "{source}" not found in execution context')
        conv = prev.conversation
        if conv is None:
            raise ExecutionError(f'continue_from: step "{source}" has no conversation state')
        if conv.provider and conv.provider != provider_name:
            raise ExecutionError(
                f'continue_from: step "{source}" holds a session of provider "{conv.provider}",'
                f' which provider "{provider_name}" cannot resume'
            )
        replies = conv.total_turns  # a user message that got no reply is no history
        if provider.session_kind == "session_id":
            # Without a session id the turns are replayed in a new session: the turn says
            # so, once (`AgentSession._request`).
            if not conv.session_id and not replies:
                raise ExecutionError(
                    f'continue_from: step "{source}" has no session ID or conversation '
                    "history to resume"
                )
        elif not replies:
            raise ExecutionError(
                f'continue_from: step "{source}" has no conversation turns for HTTP-based '
                f'provider "{provider_name}"'
            )
        inherited = conv.total_turns
        if restored is not None:
            return restored, inherited
        return conv.fork(), inherited
    if restored is not None:
        return restored, 0
    earlier = run.earlier_visit(step.name)
    if step.conversation is not None and earlier is not None and earlier.conversation:
        # A cycle came back to this step: it continues its own session, remembering the
        # earlier visits (without a `conversation:` block each visit starts afresh).
        conv = earlier.conversation
        conv.stopped_by, conv.live_from = "", None
        return conv, 0
    if step.session_tracked:
        return ConversationState(provider=provider_name), 0
    return None, 0
