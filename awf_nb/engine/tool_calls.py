"""Running the tool calls of one model reply (chat mode), for `AgentSession.turn`.

The calls of a reply are first confirmed, one at a time in call order, where the step's
`tools.confirm` asks for it: the person answers through the input reader (`Confirmer`),
in a workflow run by a `call_workflow` step too (the author composed it, as in AWF); a run
with nobody to ask refuses unless it was started with `--yes`. (A workflow a model starts
through a tool never gets the person: see engine/process.py, its children have no
terminal and no stdin.) Then the allowed calls run concurrently, at most
`tools.max_parallel` at a time, and their results go back in call order. Each call is an
event pair (`ToolCallStarted`, `ToolCallFinished`) and a transcript line, written as it
finishes.

Ctrl-C / Stop while calls run cancels them: each unfinished call gets a result saying it
was interrupted, so the history never holds a call without its result, and the person has
the turn. The step's timeout running out (it bounds the whole turn) does the same, with a
result saying so, and fails the step. Arguments that are not a JSON object are answered
with an error result.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from awf_nb.engine import events as ev
from awf_nb.engine.ports import Confirmer, Message, ToolCall, ToolResult, ToolSet
from awf_nb.engine.state import Turn
from awf_nb.workflow.tools_model import DEFAULT_MAX_PARALLEL

if TYPE_CHECKING:
    from awf_nb.engine.agent import AgentSession

INTERRUPTED = "interrupted: the person stopped this call before it finished"
# For a call whose result never came because awf itself ended (killed, crashed) while it
# ran: found when the run is resumed. Nobody stopped it; whether it took effect is unknown.
ABANDONED = (
    "interrupted: awf stopped (its process ended) before this call finished; whether the "
    "call took effect is unknown"
)
TIMED_OUT = "stopped: the step's timeout ran out before this call finished"
REFUSED = "refused by the user"
# Said to the model, and shown to whoever reads the run: every way a run can be told yes.
NOBODY_TO_ASK = (
    "refused: this tool needs the person's confirmation and nobody can be asked in this run "
    "(to allow such calls: --yes on the command line, yes=True in Python, yes: true in an "
    "eval file)"
)


async def run_tool_calls(
    session: AgentSession, tools: ToolSet, calls: list[ToolCall]
) -> tuple[list[Message], bool]:
    """The `tool` messages answering `calls` (in call order), and whether Ctrl-C / Stop
    cut them short."""
    run = session.run
    decisions: dict[str, str] = {}  # call id -> "" (run it) or the refusal to return
    for call in calls:
        run.emit(
            ev.ToolCallStarted(
                run.run_id, session.step.name, call.id, call.name, run.masker.mask(call.arguments)
            )
        )
        decisions[call.id] = await _decide(session, tools, call)
    results: dict[str, tuple[ToolResult, str, float]] = {}
    allowed = [call for call in calls if not decisions[call.id]]
    for call in calls:
        if decisions[call.id]:
            _finish(session, call, ToolResult(decisions[call.id], is_error=True), "refused", 0.0)
            results[call.id] = (ToolResult(decisions[call.id], is_error=True), "refused", 0.0)
    cut = False
    started = time.monotonic()
    if allowed:
        try:
            with run.interruptible() as interruption:  # Ctrl-C / Stop: these calls
                await _run_all(session, tools, allowed, results)
        except asyncio.CancelledError:  # the run's cancellation: results first, all the same
            why = TIMED_OUT if session.timed_out() else INTERRUPTED
            _settle_interrupted(session, allowed, results, time.monotonic() - started, why)
            raise
        if interruption.happened:
            cut = True
            _settle_interrupted(session, allowed, results, time.monotonic() - started)
    messages = [
        Message("tool", results[call.id][0].text, tool_call_id=call.id, name=call.name)
        for call in calls
    ]
    return messages, cut


async def _decide(session: AgentSession, tools: ToolSet, call: ToolCall) -> str:
    """ "" to run the call, else the refusal the model gets."""
    if not tools.needs_confirmation(call.name):
        return ""
    run = session.run
    if run.config.yes:
        return ""
    reader = run.config.reader
    if not isinstance(reader, Confirmer):
        return NOBODY_TO_ASK
    arguments = run.masker.mask(call.arguments)
    session.save_before_asking()  # the person may take a while: what was said is on disk
    run.emit(ev.AwaitingConfirmation(run.run_id, session.step.name, call.id, call.name, arguments))
    with session.waiting_for_person():
        allowed = await reader.confirm(f"Allow {call.name}({arguments})?")
    return "" if allowed else REFUSED


async def decide_permission(session: AgentSession, call: ToolCall) -> bool:
    """An agent's own request to act (ACP's request_permission), decided like a call under
    `tools.confirm`: `--yes` allows, the person is asked, nobody to ask refuses."""
    run = session.run
    if run.config.yes:
        return True
    reader = run.config.reader
    if not isinstance(reader, Confirmer):
        return False
    arguments = run.masker.mask(call.arguments)
    session.save_before_asking()
    run.emit(ev.AwaitingConfirmation(run.run_id, session.step.name, call.id, call.name, arguments))
    with session.waiting_for_person():
        allowed = await reader.confirm(f"Allow {call.name}({arguments})?")
    return bool(allowed)


async def _run_all(
    session: AgentSession,
    tools: ToolSet,
    calls: list[ToolCall],
    results: dict[str, tuple[ToolResult, str, float]],
) -> None:
    async def one(call: ToolCall) -> None:
        started = time.monotonic()
        arguments = _arguments(call)
        if isinstance(arguments, ToolResult):
            result = arguments
        else:
            result = await tools.call(call.name, arguments)
        duration = time.monotonic() - started
        results[call.id] = (result, "", duration)
        _finish(session, call, result, "", duration)

    if len(calls) == 1:  # the usual reply: no gather, no task of its own
        await one(calls[0])
        return
    # A reply may ask for hundreds of calls: at most max_parallel run at once.
    config = session.step.tools
    gate = asyncio.Semaphore(config.max_parallel if config is not None else DEFAULT_MAX_PARALLEL)

    async def gated(call: ToolCall) -> None:
        async with gate:
            await one(call)

    tasks = [asyncio.create_task(gated(call), name=f"tool call {call.id}") for call in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        # The turn's timeout, Ctrl-C / Stop or one call's error: gather gives up at the
        # first call that ends so, while the others may still be stopping their processes
        # (a command that ignores SIGTERM takes the kill grace). Stop them all and wait, so
        # no call outlives the turn (or the run's event loop, where its end would be an
        # error nobody reads).
        for task in tasks:
            # Once: a second cancellation would cut short a call's own clean-up.
            if not task.done() and not task.cancelling():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _arguments(call: ToolCall) -> dict[str, Any] | ToolResult:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return ToolResult(f"{call.name}: the arguments are not valid JSON ({exc})", is_error=True)
    if not isinstance(value, dict):
        return ToolResult(f"{call.name}: the arguments must be a JSON object", is_error=True)
    return value


def _settle_interrupted(
    session: AgentSession,
    calls: list[ToolCall],
    results: dict[str, tuple[ToolResult, str, float]],
    ran: float,
    why: str = INTERRUPTED,
) -> None:
    """Results for the calls Ctrl-C / Stop (or the step's timeout) cut short; they ran
    for `ran` seconds."""
    for call in calls:
        if call.id not in results:
            result = ToolResult(why, is_error=True)
            results[call.id] = (result, "interrupted", ran)
            _finish(session, call, result, "interrupted", ran)


def _finish(
    session: AgentSession, call: ToolCall, result: ToolResult, outcome: str, duration: float
) -> None:
    """Tell the frontend and write the result down (the transcript, the conversation)."""
    run, step = session.run, session.step.name
    text = run.masker.mask(result.text)
    run.emit(
        ev.ToolCallFinished(
            run.run_id,
            step,
            call.id,
            call.name,
            text,
            result.is_error,
            duration,
            outcome,  # type: ignore[arg-type]
        )
    )
    session.record_tool_result(
        Turn(
            role="tool",
            content=text,
            tool_call_id=call.id,
            name=call.name,
            duration=round(duration, 3),
        )
    )
