"""Branch from here: a new run made of a stored run's history up to a step (or a turn of a
conversation), the message there optionally replaced, which then goes on live.

`fork_run(store, run_id, at, edit)` only reads the original run's files: the new run gets
its own folder (state file, transcript, workflow text) and a history row, and records
`forked_from: {run, step, turn}`. It is continued as any stored run is, with
`Resume(new_id, from_step=point.resume_step)`.

Every kind of step can be a fork point:

- `STEP` (a command, an agent, a parallel or loop step, a call_workflow step): it runs
  again, or, with an edit, it does not run and the edit is its output;
- `STEP#TURN` in a conversation: its messages up to TURN are kept (the TURN-th replaced by
  the edit), and the conversation goes on from there;
- `BRANCH` of a parallel step: the other branches' results are kept, the parallel step
  runs again with that branch only;
- `LOOP#N` of a for_each or while step: iterations 1..N-1 are kept, the loop goes on at
  iteration N;
- `CALL/STEP[#TURN]` inside the workflow a call_workflow step ran: that child run is forked
  at STEP (any of the above), and the new run's call step goes on with the forked child.

A conversation's provider session (agent CLIs keep one on their server) cannot be resumed
at an earlier turn: the fork starts a fresh session, and the engine replays the kept turns
into it (and says so once), as it does when a session cannot be continued.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.state import StepState
from awf_nb.errors import UserError
from awf_nb.secrets import Masker
from awf_nb.workflow.model import CallWorkflowStep, ForEachStep, ParallelStep, WhileStep

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.store import Store
    from awf_nb.workflow.model import Workflow

__all__ = ["ForkPoint", "fork_run", "parse_fork_point", "read_edit"]


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork branches: a step, and in a conversation a message (1-based, the
    system prompt not counted)."""

    step: str
    turn: int | None = None
    # The step the new run goes on from when it is not `step` itself: the parallel step of
    # a branch, the loop of an iteration, the call_workflow step of a step inside it.
    start: str = ""

    @property
    def resume_step(self) -> str:
        return self.start or self.step

    def __str__(self) -> str:
        return self.step if self.turn is None else f"{self.step}#{self.turn}"


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
    return _fork(store, run_id, point, edit, env, store.new_run_id(), "")


def _fork(
    store: Store,
    run_id: str,
    point: ForkPoint,
    edit: str | None,
    env: dict[str, str] | None,
    new_id: str,
    parent: str,
) -> tuple[str, ForkPoint]:
    original = store.load_state(run_id)
    if original.is_alive_elsewhere():
        raise UserError(
            f"run {original.run_id} is still running (process {original.pid}); "
            "fork it once it has stopped"
        )
    call, _, inside = point.step.partition("/")
    _check_ran(original, call)
    workflow = _workflow(original)
    state = original.model_copy(deep=True)
    masker = _masker(workflow, state, env)
    step = workflow.steps.get(call) if workflow is not None else None
    if inside:
        point = _into_child(store, state, point, edit, env, new_id, step)
    elif (group := _parallel_of(workflow, state, point.step)) is not None:
        point = _in_branch(state, point, edit, group.name, group.parallel)
    elif isinstance(step, (ForEachStep, WhileStep)) and point.turn is not None:
        point = _at_iteration(state, point, edit, step)
    elif (loop := _loop_of(workflow, state, point.step)) is not None:
        raise UserError(
            f'step "{point.step}" runs in loop "{loop}" of run {state.run_id}: fork at one '
            f"of its iterations, --at {loop}#N (N from 1)"
        )
    else:
        _at_step(state, point, edit, masker)
    if parent:
        state.parent_run_id = parent
    _reset(state, new_id, point, original.run_id)
    _copy_transcript(store, original, state, point)
    store.save_state(state)
    store.record_run(state)
    return new_id, point


def _check_ran(original: RunState, step: str) -> None:
    if step not in original.steps or step not in original.executed:
        ran = ", ".join(dict.fromkeys(original.executed)) or "none"
        raise UserError(
            f'step "{step}" did not run in run {original.run_id} (steps that ran: {ran})'
        )


def _no_edit(point: ForkPoint, edit: str | None, run: str) -> None:
    if edit is not None:
        raise UserError(
            f"--edit replaces a message of a conversation: give its turn, --at {point.step}#N",
            hint=f"`awf status {run}` shows the conversation's messages, numbered",
        )


def _last_index(executed: list[str], name: str, before: int | None = None) -> int:
    end = len(executed) if before is None else before
    return max(i for i in range(end) if executed[i] == name)


def _at_step(state: RunState, point: ForkPoint, edit: str | None, masker: Masker) -> None:
    """A step (or a conversation's message): everything before its last run is kept."""
    fork_index = _last_index(state.executed, point.step)
    kept = state.executed[:fork_index]
    step_state = state.steps[point.step]
    state.steps = {name: st for name, st in state.steps.items() if name in kept}
    if point.turn is not None:
        conv = step_state.conversation
        if conv is None:
            raise UserError(
                f'step "{point.step}" is not a conversation: fork it with --at {point.step}'
            )
        _cut_conversation(conv, point, edit, masker, state.run_id)
        step_state.status = "running"
        step_state.output = _last_reply(conv)
        state.steps[point.step] = step_state
    elif edit is not None:  # the step's output replaced: it is not run again
        if step_state.conversation is not None:
            _no_edit(point, edit, state.run_id)
        state.resume_inside = {"step": point.step, "output": masker.mask(edit)}
    state.executed = kept


def _parallel_of(workflow: Workflow | None, state: RunState, branch: str) -> ParallelStep | None:
    """The parallel step that last ran `branch` as one of its branches, if one did."""
    if workflow is None:
        return None
    at = _last_index(state.executed, branch)
    groups = [
        step
        for step in workflow.steps.values()
        if isinstance(step, ParallelStep)
        and branch in step.parallel
        and step.name in state.executed[:at]
    ]
    return max(groups, key=lambda g: _last_index(state.executed, g.name, at), default=None)


def _loop_of(workflow: Workflow | None, state: RunState, step: str) -> str | None:
    """The loop that ran `step` in its body, if one did."""
    if workflow is None:
        return None
    for loop in workflow.steps.values():
        looped = isinstance(loop, (ForEachStep, WhileStep)) and step in loop.body
        if looped and loop.name in state.executed:
            return loop.name
    return None


def _in_branch(
    state: RunState, point: ForkPoint, edit: str | None, group: str, branches: list[str]
) -> ForkPoint:
    """One branch of a parallel step: the parallel step runs again with that branch only,
    the other branches' finished results kept."""
    if point.turn is not None:
        raise UserError(
            f'step "{point.step}" is a branch of parallel step "{group}": a fork at one of '
            f"its messages is not supported; fork at the branch, --at {point.step}"
        )
    _no_edit(point, edit, state.run_id)
    at = _last_index(state.executed, point.step)
    start = _last_index(state.executed, group, at)
    keep = [
        name
        for name in dict.fromkeys(state.executed[start + 1 :])
        if name != point.step
        and name in branches
        and name in state.steps
        and state.steps[name].status == "completed"
    ]
    kept = [*state.executed[: start + 1], *keep]
    state.steps = {name: st for name, st in state.steps.items() if name in kept}
    state.executed = kept
    state.resume_inside = {"step": group, "keep": keep}
    return ForkPoint(point.step, None, start=group)


def _at_iteration(
    state: RunState, point: ForkPoint, edit: str | None, loop: ForEachStep | WhileStep
) -> ForkPoint:
    """Iteration N of a loop: the iterations before it kept (their results, and each body
    step as it was at the end of iteration N-1); the loop goes on at iteration N."""
    _no_edit(point, edit, state.run_id)
    assert point.turn is not None
    start = _last_index(state.executed, loop.name)
    first = loop.body[0] if loop.body else ""
    starts = [i for i in range(start + 1, len(state.executed)) if state.executed[i] == first]
    try:
        results = json.loads(state.steps[loop.name].output or "[]")
    except ValueError:
        results = []
    if not isinstance(results, list):
        results = []
    if point.turn > len(starts) or point.turn - 1 > len(results):
        raise UserError(
            f'loop "{loop.name}" of run {state.run_id} ran {len(starts)} iterations; '
            f"--at {loop.name}#{point.turn} is past its end"
        )
    cut = starts[point.turn - 1]
    kept = state.executed[:cut]
    steps: dict[str, StepState] = {}
    for name, st in state.steps.items():
        if name not in kept:
            continue
        if name in loop.body:
            earlier = st.after_visit(kept.count(name))
            if earlier is None:
                continue
            st = earlier
            state.visits[name] = st.visit
        steps[name] = st
    state.steps = steps
    state.executed = kept
    state.resume_inside = {
        "step": loop.name,
        "iteration": point.turn,
        "results": results[: point.turn - 1],
    }
    return ForkPoint(point.step, point.turn, start=loop.name)


def _into_child(
    store: Store,
    state: RunState,
    point: ForkPoint,
    edit: str | None,
    env: dict[str, str] | None,
    new_id: str,
    step: Any,
) -> ForkPoint:
    """A step inside the workflow a call_workflow step ran: that child run is forked at
    it (as its own new run, a child of the new one), and the call step goes on with it."""
    call, _, inside = point.step.partition("/")
    child = state.steps[call].child_run
    if not isinstance(step, CallWorkflowStep) or not child:
        what = (
            "is not a call_workflow step"
            if not isinstance(step, CallWorkflowStep)
            else ("did not record the run it called")
        )
        raise UserError(f'step "{call}" of run {state.run_id} {what}; fork it with --at {call}')
    inner = ForkPoint(inside, point.turn)
    child_id, child_point = _fork(store, child, inner, edit, env, store.new_run_id(), new_id)
    _at_step(state, ForkPoint(call), None, Masker())
    state.resume_inside = {"step": call, "child": child_id, "from": child_point.resume_step}
    return ForkPoint(point.step, point.turn, start=call)


def _workflow(state: RunState) -> Workflow | None:
    """The run's workflow as it was written, or None when it no longer loads (a fork at a
    plain step still works; resume says why it does not load)."""
    from awf_nb.workflow.loader import load_text

    try:
        return load_text(state.workflow_source, file=state.workflow_path or "<inline>")
    except Exception:
        return None


def _masker(workflow: Workflow | None, state: RunState, env: dict[str, str] | None) -> Masker:
    """The run's secrets as far as they can be known again (its workflow's and the
    environment's; secret inputs were never stored)."""
    if workflow is None:
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
    state.current_step = point.resume_step
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
