"""The conversation loop of `mode: conversation`: send → stream → answer → repeat.

The first message is the step's rendered `prompt`; each reply streams to the frontend; then
the partner (engine/partner.py) answers: the person at a `> ` prompt or notebook text box
by default, or another agent, scripted replies or a simulated user (`conversation.with`).
The person ends it with an empty line, `exit`, `quit` or end of input (`user_exit`); an
exchange without the person ends when `until` holds (`condition`) or after `max_turns`
agent replies (`max_turns`). A provider error stops it with `stopped_by: error` (the step
fails, the last good reply stays in `Output`); cancellation or a timeout with `cancelled`.
Ctrl-C / Stop during an automatic exchange lets the person take over for one message.
Every message is persisted as it happens (see `AgentSession`).
"""

from __future__ import annotations

import asyncio

from awf_nb.engine import events as ev
from awf_nb.engine.agent import AgentSession, Reply, TurnTimeout
from awf_nb.engine.interruption import PartnerInterrupted
from awf_nb.engine.partner import PERSON, Exchange, read_message
from awf_nb.errors import AwfError


async def converse(
    session: AgentSession, prompt: str, exchange: Exchange, *, resuming: bool = False
) -> None:
    """Run the conversation until it ends. `resuming`: re-opened by `awf resume`."""
    conv = session.conv
    assert conv is not None, "a conversation step always has conversation state"
    conv.stopped_by = ""
    run, step = session.run, session.step.name
    message: str | None = prompt
    last = Reply(_last_reply(session))
    said = ""  # the partner's latest message
    try:
        # A conversation with replies goes on; so does one whose first message was sent
        # and never answered (a fork at it, a crash): it is answered, not sent again.
        opened = session.replies > conv.visit_start or session.pending_user_message() is not None
        if resuming and opened:
            run.emit(ev.ConversationResumed.from_turns(run.run_id, step, conv.turns))
            said = _last_said(session) if exchange.partner.name else ""
            message = session.pending_user_message()
            if message is None:
                message = await _answer(session, exchange, last)
        else:
            conv.visit_start = session.replies
            run.emit(ev.UserMessage(run.run_id, step, run.masker.mask(prompt), 1))
            session.record_message(prompt)
        while message is not None:
            last = await session.turn(message, already_recorded=True)
            if _stops(session, exchange, last.text, said, after_reply=True):
                return
            message = await _answer(session, exchange, last)
            if message is not None:
                said = message
                if _stops(session, exchange, last.text, said, after_reply=False):
                    return
        conv.stopped_by = "user_exit"
    except (asyncio.CancelledError, TurnTimeout):
        conv.stopped_by = "cancelled"
        raise
    except AwfError:
        conv.stopped_by = "error"
        raise


async def _answer(session: AgentSession, exchange: Exchange, reply: Reply) -> str | None:
    """The partner's next message (recorded), or None when the conversation ends there.

    In an interactive run, a reply or a partner message cut short by Ctrl-C / Stop hands
    one message to the person: typed text goes to the agent in the partner's place, an
    empty line lets the partner carry on, `exit` ends the conversation."""
    partner, run = exchange.partner, session.run
    automatic = bool(partner.name)
    turn = session.replies + 1
    speaker = partner.name
    message: str | None
    while True:
        if automatic and reply.interrupted and run.config.reader is not None:
            taken = await _take_over(session, turn)
            if taken is None:
                return None
            if taken:
                message, speaker = taken, PERSON
                break
        try:
            message = await partner.answer(reply.text, turn)
            break
        except PartnerInterrupted:  # its message so far is recorded, marked interrupted
            reply = Reply(reply.text, interrupted=True)
    if message is None:
        return None
    if speaker != partner.name or not partner.records_itself:
        by = partner.last if speaker == partner.name else None
        session.record_message(message, speaker, duration=by.duration if by else 0.0)
    run.checkpoint()
    return message


async def _take_over(session: AgentSession, turn: int) -> str | None:
    """The person's message in an automatic exchange: text, "" (carry on) or None (exit)."""
    return await read_message(session.run, session.step.name, turn, speaker=PERSON, blank="")


def _stops(
    session: AgentSession, exchange: Exchange, reply: str, message: str, *, after_reply: bool
) -> bool:
    """Whether `until` holds or `max_turns` is reached; sets `stopped_by` when so."""
    conv, run = session.conv, session.run
    assert conv is not None
    turn = session.replies - conv.visit_start
    if exchange.until:
        variables = {
            "reply": reply,
            "message": message,
            "turn": turn,
            "tokens": session.st.tokens_used,
        }
        if run.ctx.condition(
            exchange.until, step=session.step.name, what="conversation.until", extra=variables
        ):
            conv.stopped_by = "condition"
            return True
    if after_reply and exchange.max_turns is not None and turn >= exchange.max_turns:
        conv.stopped_by = "max_turns"
        return True
    return False


def _last_said(session: AgentSession) -> str:
    """The last message sent to the agent in the partner's place (by the partner, or by
    the person stepping in): `until`'s `message`, as it was before the run stopped."""
    turns = session.conv.turns if session.conv else []
    return next(
        (t.content for t in reversed(turns) if t.role == "user" and t.speaker and t.reached_agent),
        "",
    )


def _last_reply(session: AgentSession) -> str:
    turns = session.conv.turns if session.conv else []
    return next((t.content for t in reversed(turns) if t.role == "assistant"), "")
