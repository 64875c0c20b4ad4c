"""Text for a terminal, without the terminal frontend's weight (no asyncio, no readline):
untrusted text made safe (`terminal_safe`, from `awf_nb.safe_text`, where it is described),
and a stored run described for `awf status`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awf_nb.safe_text import terminal_safe

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState, Turn

__all__ = ["describe_state", "terminal_safe"]


def describe_state(state: RunState) -> str:
    """`awf status`: a run's status, steps and conversations, for a person to read.

    Its figures are the run's: `duration` the time spent running (over its resumes; the
    wall-clock time since it started is shown beside it when it differs), tokens as the
    frontends and the summary show them (`format_tokens`: `~` marks estimates)."""
    from awf_nb.engine.summary import format_duration, format_tokens

    duration = format_duration(state.duration)
    wall = format_duration(state.wall_duration)
    if state.completed_at is not None and wall != duration:
        duration += f" running ({wall} since it started)"
    lines = [
        f"run       {state.run_id}",
        f"workflow  {state.workflow_name}"
        + (f" ({state.workflow_path})" if state.workflow_path else ""),
        f"status    {state.status}"
        + (f" at step {state.current_step}" if state.status != "completed" else ""),
        f"started   {state.started_at.isoformat(timespec='seconds')}",
        f"duration  {duration}",
        f"tokens    {format_tokens(state.total_tokens, state.tokens_estimated)}",
    ]
    if state.error:
        lines.append(f"error     {state.error}")
    for paused_at, when in state.paused.items():  # a breakpoint it waits at (awf resume: again)
        lines.append(f"paused    {when} step {paused_at} (awf resume {state.run_id} pauses there)")
    if state.message:
        lines.append(f"message   {state.message}")
    if state.inputs:
        lines.append("inputs")
        lines.extend(f"  {k} = {v!r}" for k, v in state.inputs.items())
    lines.append("steps")
    for name in dict.fromkeys(state.executed):
        step = state.steps[name]
        tokens = format_tokens(step.tokens_used, step.tokens_estimated)
        extra = f" · {tokens}" if step.tokens_used else ""
        code = f" · exit {step.exit_code}" if step.exit_code not in (None, 0) else ""
        took = format_duration(step.duration)
        lines.append(f"  {step.status:<9} {name} ({took}{extra}{code})")
        if step.error:
            lines.append(f"            {step.error}")
        conv = step.conversation
        if conv is not None:
            stopped = f", stopped by {conv.stopped_by}" if conv.stopped_by else ""
            session = f", session {conv.session_id}" if conv.session_id else ""
            lines.append(f"            conversation: {conv.total_turns} turns{stopped}{session}")
            lines.extend(_exchange(conv.turns))
    return terminal_safe("\n".join(lines))  # stored text may carry escape sequences


def _exchange(turns: list[Turn]) -> list[str]:
    """A conversation in order: who spoke, the agent's turn number, tokens and time — the
    figures the live line showed for each reply (`TurnFinished`).

    The rounds of one reply (text, tool calls, results, more text) share a turn number."""
    from awf_nb.engine.summary import format_duration, format_tokens

    lines: list[str] = []
    number, previous = 0, ""
    for turn in turns:
        if turn.role == "system":
            continue
        text = turn.content if len(turn.content) <= 200 else turn.content[:197] + "..."
        cost = [format_tokens(turn.tokens, turn.tokens_estimated), format_duration(turn.duration)]
        if turn.role == "tool":
            who, figures = f"tool {turn.name}", [format_duration(turn.duration)]
        elif turn.role == "assistant":
            number += previous != "tool"
            who = "agent"
            figures = [f"turn {number}", *cost]
            if turn.tool_calls:
                text = f"{text} [calls {', '.join(c['name'] for c in turn.tool_calls)}]".strip()
        elif turn.speaker in ("", "person"):
            who, figures = "you", []
        else:  # a conversation partner: what it wrote cost tokens and time too
            who, figures = turn.speaker, cost if turn.tokens or turn.duration else []
        previous = turn.role
        mark = " [interrupted]" if turn.interrupted else ""
        shown = f" [{' · '.join(figures)}]" if figures else ""
        lines.append(f"              {who}{shown}: {text}{mark}".replace("\n", " "))
    return lines
