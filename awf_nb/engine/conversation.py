"""The conversation loop of `mode: conversation`: send → stream → read → repeat.

The first message is the step's rendered `prompt`; each reply streams to the frontend;
then the person's next message is read from the `InputReader` (a `> ` prompt, a notebook
text box, or a scripted list). An empty or blank line, `exit`, `quit` (any case) or end of
input ends it with `stopped_by: user_exit` and the step succeeds with the last reply as
`Output`. A provider error stops it with `stopped_by: error` (the step fails, the last good
reply stays in `Output`); cancellation or a timeout with `stopped_by: cancelled`. A step's `timeout`
bounds each reply and also each wait for the person at the prompt.
Every turn is persisted as it happens (see `AgentSession`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from awf_nb.engine import events as ev
from awf_nb.engine.agent import AgentSession, TurnTimeout
from awf_nb.errors import AwfError

if TYPE_CHECKING:
    from awf_nb.engine.run import Runner

EXIT_WORDS = frozenset({"exit", "quit"})
PROMPT = "> "


async def converse(session: AgentSession, prompt: str, *, resuming: bool = False) -> None:
    """Run the conversation until the user ends it. `resuming`: re-opened by `awf resume`."""
    conv = session.conv
    assert conv is not None, "a conversation step always has conversation state"
    conv.stopped_by = ""
    run = session.run
    step = session.step.name
    timeout = session.step.timeout
    message: str | None = prompt
    already_recorded = False
    if resuming and session.replies > 0:
        pending = session.pending_user_message()
        if pending is not None:  # the process died while this message was being answered
            message, already_recorded = pending, True
        else:
            message = await read_message(run, step, session.replies + 1, timeout)
    elif message is not None:
        run.emit(ev.UserMessage(run.run_id, step, run.masker.mask(message), 1))
    try:
        while message is not None:
            await session.turn(message, already_recorded=already_recorded)
            already_recorded = False
            message = await read_message(run, step, session.replies + 1, timeout)
        conv.stopped_by = "user_exit"
    except (asyncio.CancelledError, TurnTimeout):
        conv.stopped_by = "cancelled"
        raise
    except AwfError:
        conv.stopped_by = "error"
        raise


def is_end_of_conversation(text: str | None) -> bool:
    return text is None or not text.strip() or text.strip().lower() in EXIT_WORDS


async def read_message(
    run: Runner, step: str, turn: int, timeout: float | None = None
) -> str | None:
    """The person's next message, or None when they ended the conversation."""
    reader = run.config.reader
    if reader is None:  # headless: behave as if input reached its end
        return None
    run.emit(ev.AwaitingInput(run.run_id, step, PROMPT))
    try:
        async with asyncio.timeout(timeout):
            text = await reader.read(PROMPT)
    except TimeoutError:
        raise TurnTimeout(
            f"step {step}: no message at the prompt within the step timeout ({timeout:g}s)",
            step=step,
        ) from None
    if is_end_of_conversation(text):
        return None
    assert text is not None
    run.emit(ev.UserMessage(run.run_id, step, run.masker.mask(text), turn))
    return text
