"""One ACP session: one awf run at a time, its events sent as session updates, the person's
messages and permission answers taken from the client.

A conversation step waiting for the person *parks* the run: the prompt turn ends
(`end_turn`) and the client's next prompt is the person's message. `session/cancel` is
Ctrl-C: the run is cancelled and saved, resumable with `awf resume RUN_ID`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from acp import (
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    ToolCallUpdate,
)

from awf_nb.engine import events as ev

log = logging.getLogger(__name__)

# Session updates waiting to be sent to the client; past this the run waits (back-pressure
# on a client that reads slowly) rather than holding an unbounded queue.
MAX_PENDING_UPDATES = 1024

Send = Callable[[Any], Awaitable[None]]
# how a step or tool call shown to the client ended
ToolCallEnd = Literal["completed", "failed"]
Ask = Callable[[ToolCallUpdate, list[PermissionOption]], Awaitable[Any]]

_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(
        option_id="allow_always", name="Allow always (this session)", kind="allow_always"
    ),
    PermissionOption(option_id="deny", name="Deny", kind="reject_once"),
]


class Turn:
    """How the current prompt turn ends: the run parked for the person's next message, or
    finished (its status)."""

    def __init__(self) -> None:
        self.done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def end(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_result(reason)


class AcpSession:
    """The bridge between an awf run and one ACP session (reader, confirmer and sink)."""

    def __init__(self, session_id: str, send: Send, ask: Ask) -> None:
        self.session_id = session_id
        self._send = send
        self._ask = ask
        self._updates: asyncio.Queue[Any] = asyncio.Queue(MAX_PENDING_UPDATES)
        self._pump = asyncio.get_running_loop().create_task(self._pump_updates())
        self._messages: asyncio.Queue[str | None] = asyncio.Queue(1)
        self.turn: Turn | None = None
        self.parked = False
        self.run_task: asyncio.Task[Any] | None = None
        self.control: Any = None  # the run's RunControl (Stop, Cancel, its state)
        self.run_id = ""
        self.finished: ev.RunFinished | None = None
        self._allowed: set[str] = set()
        self._awaiting: ev.AwaitingConfirmation | None = None
        self.tokens_in = 0
        self.tokens_out = 0

    # -- the run's input reader -------------------------------------------------------
    async def read(self, prompt: str) -> str | None:
        """The person's next message: the current prompt turn ends here (parked), and the
        client's next prompt answers."""
        self.parked = True
        await self.flush()
        if self.turn is not None:
            self.turn.end("end_turn")
        try:
            return await self._messages.get()
        finally:
            self.parked = False

    async def confirm(self, question: str) -> bool | None:
        """A `tools.confirm` call: `session/request_permission` with the tool and its
        arguments; "allow always" holds for this tool for the rest of the session."""
        waiting = self._awaiting
        name = waiting.name if waiting else question
        if name in self._allowed:
            return True
        await self.flush()
        arguments: Any = waiting.arguments if waiting else ""
        with contextlib.suppress(TypeError, ValueError):
            arguments = json.loads(arguments)
        call = ToolCallUpdate(
            tool_call_id=waiting.call_id if waiting else "confirm",
            title=f"Allow {name}?",
            kind="execute",
            status="pending",
            raw_input={"tool": name, "arguments": arguments},
        )
        response = await self._ask(call, _OPTIONS)
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome) or outcome.option_id == "deny":
            return False
        if outcome.option_id == "allow_always":
            self._allowed.add(name)
        return True

    def give(self, text: str) -> None:
        """The client's prompt while the run is parked: the person's message."""
        self._messages.put_nowait(text)

    # -- the run's event sink ---------------------------------------------------------
    def emit(self, event: Any) -> None:
        update = self._update(event)
        if update is None:
            return
        try:
            self._updates.put_nowait(update)
        except asyncio.QueueFull:  # a client that stopped reading: drop, say so once
            log.warning("acp session %s: client too slow, an update was dropped", self.session_id)

    def _update(self, event: Any) -> Any:
        if isinstance(event, ev.RunStarted):
            self.run_id = event.run_id
            return None
        if isinstance(event, ev.AgentText) and not event.speaker:
            return update_agent_message_text(event.text)
        if isinstance(event, ev.StepStarted):
            title = f"{event.step} ({event.kind}{': ' + event.detail if event.detail else ''})"
            return start_tool_call(
                _step_id(event.step, event.attempt), title[:200], kind="other", status="in_progress"
            )
        if isinstance(event, ev.StepFinished):
            status: ToolCallEnd = (
                "completed" if event.status in ("completed", "skipped") else "failed"
            )
            return update_tool_call(
                _step_id(event.step, 1), status=status, raw_output={"status": event.status}
            )
        if isinstance(event, ev.ToolCallStarted):
            return start_tool_call(
                event.call_id,
                event.name,
                kind="execute",
                status="in_progress",
                raw_input=event.arguments,
            )
        if isinstance(event, ev.ToolCallFinished):
            status = "failed" if event.is_error or event.outcome else "completed"
            return update_tool_call(event.call_id, status=status, raw_output=event.result)
        if isinstance(event, ev.AwaitingConfirmation):
            self._awaiting = event
            return None
        if isinstance(event, ev.TurnFinished) and not event.speaker:
            self.tokens_out += event.tokens
            return None
        if isinstance(event, ev.RunFinished):
            self.finished = event
            return None
        return None

    async def _pump_updates(self) -> None:
        while True:
            update = await self._updates.get()
            try:
                await self._send(update)
            except Exception as exc:  # a client gone away: the run goes on
                log.debug("acp session %s: update not sent: %s", self.session_id, exc)
            finally:
                self._updates.task_done()

    async def flush(self) -> None:
        """Wait until every update so far has reached the client."""
        await self._updates.join()

    async def say(self, text: str) -> None:
        await self._send(update_agent_message_text(text))

    async def close(self) -> None:
        if self.run_task is not None and not self.run_task.done():
            if self.control is not None:
                self.control.cancel()
            self.run_task.cancel()
        self._pump.cancel()


def _step_id(step: str, attempt: int) -> str:
    # one tool call per step: a retried step updates the same entry
    del attempt
    return f"step:{step}"
