"""Branch from here: a new run made of a stored run's history up to a step (or a turn of a
conversation), the message there optionally replaced, which then goes on live.

`fork_run(store, run_id, at, edit)` only reads the original run's files: the new run gets
its own folder (state file, transcript, workflow text) and a history row, and records
`forked_from: {run, step, turn}`. It is continued as any stored run is, with
`Resume(new_id, from_step=step)`.

A conversation's provider session (agent CLIs keep one on their server) cannot be resumed
at an earlier turn: the fork starts a fresh session, and the engine replays the kept turns
into it (and says so once), as it does when a session cannot be continued.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import UserError
from awf_nb.secrets import Masker

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.store import Store

__all__ = ["ForkPoint", "fork_run", "parse_fork_point", "read_edit"]


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork branches: a step, and in a conversation a message (1-based, the
    system prompt not counted)."""

    step: str
    turn: int | None = None


def parse_fork_point(at: str) -> ForkPoint:
    """`STEP` or `STEP#TURN` (TURN a positive whole number)."""
    step, sep, turn = at.partition("#")
    if not step or (sep and not turn.isdigit()) or (sep and int(turn) < 1):
        raise UserError(
            f'--at "{at}" is not STEP or STEP#TURN',
            hint="for example --at chat#2 (the conversation's second message)",
        )
    return ForkPoint(step, int(turn) if sep else None)


def read_edit(value: str | None, *, cwd: Path | None = None) -> str | None:
    """The edited text: `TEXT`, or `@FILE` for a file's text."""
    if value is None or not value.startswith("@"):
        return value
    path = (cwd or Path.cwd()) / value[1:]
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read --edit file {path}: {exc}") from exc


def fork_run(
    store: Store,
    run_id: str,
    at: str | ForkPoint,
    edit: str | None = None,
    *,
    env: dict[str, str] | None = None,
) -> tuple[str, ForkPoint]:
    """Make the new run; its id and the point it continues from. The original is only read."""
    point = parse_fork_point(at) if isinstance(at, str) else at
    original = store.load_state(run_id)
    if original.is_alive_elsewhere():
        raise UserError(
            f"run {original.run_id} is still running (process {original.pid}); "
            "fork it once it has stopped"
        )
    if point.step not in original.steps or point.step not in original.executed:
        ran = ", ".join(dict.fromkeys(original.executed)) or "none"
        raise UserError(
            f'step "{point.step}" did not run in run {original.run_id} (steps that ran: {ran})'
        )
    state = original.model_copy(deep=True)
    masker = _masker(state, env)
    fork_index = len(state.executed) - 1 - state.executed[::-1].index(point.step)
    kept = state.executed[:fork_index]
    step_state = state.steps[point.step]
    state.steps = {name: st for name, st in state.steps.items() if name in kept}
    if point.turn is not None:
        conv = step_state.conversation
        if conv is None:
            raise UserError(
                f'step "{point.step}" is not a conversation: fork it with --at {point.step}'
            )
        _cut_conversation(conv, point, edit, masker, original.run_id)
        step_state.status = "running"
        step_state.output = _last_reply(conv)
        state.steps[point.step] = step_state
    elif edit is not None:
        raise UserError(
            f"--edit replaces a message of a conversation: give its turn, --at {point.step}#N",
            hint=f"`awf status {original.run_id}` shows the conversation's messages, numbered",
        )
    state.executed = kept
    new_id = store.new_run_id()
    _reset(state, new_id, point, original.run_id)
    _copy_transcript(store, original, state, point)
    store.save_state(state)
    store.record_run(state)
    return new_id, point


def _masker(state: RunState, env: dict[str, str] | None) -> Masker:
    """The run's secrets as far as they can be known again (its workflow's and the
    environment's; secret inputs were never stored)."""
    from awf_nb.workflow.loader import load_text

    try:
        workflow = load_text(state.workflow_source, file=state.workflow_path or "<inline>")
    except Exception:  # a workflow that no longer loads still forks; resume says why
        return Masker()
    return Masker.for_run(workflow, dict(state.inputs), dict(os.environ if env is None else env))


def _cut_conversation(
    conv: Any, point: ForkPoint, edit: str | None, masker: Masker, run: str
) -> None:
    messages = [i for i, t in enumerate(conv.turns) if t.role != "system"]
    assert point.turn is not None
    if point.turn > len(messages):
        raise UserError(
            f'step "{point.step}" of run {run} has {len(messages)} messages; '
            f"--at {point.step}#{point.turn} is past its end"
        )
    index = messages[point.turn - 1]
    conv.turns = conv.turns[: index + 1]
    if edit is not None:
        turn = conv.turns[index]
        conv.turns[index] = turn.model_copy(update={"content": masker.mask(edit)})
    conv.live_from = None  # the kept turns are written whole into the fork's state file
    conv.transcript_line = 0
    conv.stopped_by = ""
    conv.session_id = ""  # a server-side session cannot go back to an earlier turn
    conv.partner_session_id = ""
    conv.total_turns = conv.count_replies()


def _last_reply(conv: Any) -> str:
    for turn in reversed(conv.turns):
        if turn.role == "assistant":
            return str(turn.content)
    return ""


def _reset(state: RunState, new_id: str, point: ForkPoint, original: str) -> None:
    state.run_id = new_id
    state.forked_from = {"run": original, "step": point.step, "turn": point.turn}
    state.status = "cancelled"  # stopped at the fork point, ready to go on
    state.current_step = point.step
    state.completed_at = None
    state.error = state.message = state.completion_reason = ""
    state.exit_code = 0
    state.pid, state.host, state.pid_started = 0, "", ""


def _copy_transcript(store: Store, original: RunState, state: RunState, point: ForkPoint) -> None:
    """The original transcript's lines of the kept steps, then the kept turns of a
    conversation fork (as the fork's own lines)."""
    kept = set(state.executed)
    for record in store.read_transcript(original.run_id):
        if record.get("step") in kept and record.get("step") != point.step:
            store.append_transcript(state.run_id, dict(record))
    conv = state.steps.get(point.step)
    if point.turn is not None and conv is not None and conv.conversation is not None:
        for turn in conv.conversation.turns:
            store.append_turn(state.run_id, point.step, turn)
