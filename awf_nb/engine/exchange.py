"""The conversation of a run as data: every message in order, who said it, in which step
and turn, its text, tokens, start time and duration (`RunResult.exchange`, `awf status
--json`), read from the run's transcript — or, for a run kept without storage, from the
conversations its state holds.

`speaker` is `agent` for a step's agent, a partner's name (`reviewer`, `user
(simulated)`), `user` for the person or the step's prompt (the first `user` message of a
step's visit), `tool` for a tool call or result, `system` for a system prompt. `turn` is
the number of the agent reply a message belongs to: a reply is turn N, the message it
answers too (a step's turns count on across its visits when its session continues). A
message the agent was never sent — one that ended the conversation (`until` held on it, a
simulated user's `exit`) or was cut short — asks for no reply: it carries the number of the
reply it answered, so an exchange of `max_turns: 3` has no turn 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from awf_nb.engine.state import RunState

AGENT, USER, TOOL, SYSTEM = "agent", "user", "tool", "system"


@dataclass(frozen=True)
class ExchangeTurn:
    """One message of a run's conversation (ADR-005's `ConversationTurn`)."""

    step: str
    turn: int  # the agent reply it belongs to, per step
    speaker: str
    role: str  # user, assistant, tool, system (as the transcript has it)
    text: str
    tokens: int = 0
    started_at: datetime | None = None
    duration: float = 0.0  # seconds (a reply's streaming time; 0 for what was typed or sent)
    interrupted: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat() if self.started_at else None
        return data


def run_exchange(
    state: RunState, transcript: Iterable[Mapping[str, Any]] | None
) -> list[ExchangeTurn]:
    """The run's messages in order: from its transcript records when there are some (every
    step, every visit), else from the conversations kept in `state` (session-tracked steps
    only, in the order they first ran, without times)."""
    records = list(transcript) if transcript is not None else []
    if records:
        return _from_records(records, state)
    return _from_state(state)


class _Numbering:
    """The reply number of each message of one step: a reply answers the user message
    before it (the rounds after its tool results are the same reply)."""

    def __init__(self) -> None:
        self.replies = 0
        self.waiting = False  # a user message has no reply yet

    def number(self, role: str, *, unsent: bool = False) -> int:
        if role == "user" and unsent:  # answers the reply before it, asks for none
            return max(self.replies, 1)
        if role == "user":
            self.waiting = True
            return self.replies + 1
        if role == "assistant":
            if self.waiting:
                self.replies += 1
                self.waiting = False
            return self.replies
        return self.replies + 1 if self.waiting else self.replies


# How a conversation stopped when its last message was never sent to the agent: `until`
# held on it, or it ended the exchange (a simulated user's `exit`).
_STOPPED_ON_A_MESSAGE = ("condition", "user_exit", "max_turns")


def _unsent(messages: list[tuple[str, str, bool]], stopped_by: str) -> list[bool]:
    """Of one step's messages ((role, speaker, cut short or ended), in order), which were
    never sent to its agent: cut short or ended, or a partner's (or the person's) message
    a visit of the step ended on — the next visit's prompt follows it, or it is the last
    one and the conversation stopped there. A message left by a crash is not among them:
    `awf resume` sends it."""
    unsent = [role == "user" and flagged for role, _speaker, flagged in messages]
    for index, (role, speaker, _flagged) in enumerate(messages):
        if role != "user" or not speaker:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is None:
            unsent[index] = unsent[index] or stopped_by in _STOPPED_ON_A_MESSAGE
        elif following[0] == "user" and not following[1]:  # the next visit's prompt
            unsent[index] = True
    return unsent


def _from_records(
    records: list[Mapping[str, Any]], state: RunState | None = None
) -> list[ExchangeTurn]:
    kept = [
        record
        for record in records
        if record.get("step")
        and str(record.get("role", "")) in ("user", "assistant", "tool", "system")
    ]
    by_step: dict[str, list[int]] = {}
    for index, record in enumerate(kept):
        by_step.setdefault(str(record["step"]), []).append(index)
    unsent: set[int] = set()
    for step, indices in by_step.items():
        messages = [
            (
                str(kept[i].get("role", "")),
                str(kept[i].get("speaker") or ""),
                bool(kept[i].get("interrupted") or kept[i].get("ended")),
            )
            for i in indices
            if kept[i].get("role") != "system"
        ]
        shown = [i for i in indices if kept[i].get("role") != "system"]
        flags = _unsent(messages, _stopped_by(state, step))
        unsent.update(i for i, flag in zip(shown, flags, strict=True) if flag)
    numbering: dict[str, _Numbering] = {}
    found: list[ExchangeTurn] = []
    for index, record in enumerate(kept):
        step, role = str(record.get("step", "")), str(record.get("role", ""))
        number = numbering.setdefault(step, _Numbering()).number(role, unsent=index in unsent)
        duration = float(record.get("duration") or 0.0)
        ended = _time(record.get("ts"))
        started = ended - timedelta(seconds=duration) if ended is not None else None
        found.append(
            ExchangeTurn(
                step=step,
                turn=number,
                speaker=_speaker(role, str(record.get("speaker") or "")),
                role=role,
                text=str(record.get("content", "")),
                tokens=int(record.get("tokens") or 0),
                started_at=started,
                duration=duration,
                interrupted=bool(record.get("interrupted", False)),
            )
        )
    return found


def _from_state(state: RunState) -> list[ExchangeTurn]:
    found: list[ExchangeTurn] = []
    for step in dict.fromkeys(state.executed):
        conv = state.steps[step].conversation if step in state.steps else None
        if conv is None:
            continue
        numbering = _Numbering()
        shown = [t for t in conv.turns if t.role != "system"]
        flags = _unsent(
            [(t.role, t.speaker, t.interrupted or t.ended) for t in shown], conv.stopped_by
        )
        unsent = {id(t) for t, flag in zip(shown, flags, strict=True) if flag}
        for turn in conv.turns:
            found.append(
                ExchangeTurn(
                    step=step,
                    turn=numbering.number(turn.role, unsent=id(turn) in unsent),
                    speaker=_speaker(turn.role, turn.speaker),
                    role=turn.role,
                    text=turn.content,
                    tokens=turn.tokens,
                    duration=turn.duration,
                    interrupted=turn.interrupted,
                )
            )
    return found


def _stopped_by(state: RunState | None, step: str) -> str:
    """How the step's (last visit's) conversation stopped ("" while it runs)."""
    kept = state.steps.get(step) if state is not None else None
    conv = kept.conversation if kept is not None else None
    return conv.stopped_by if conv is not None else ""


def _speaker(role: str, speaker: str) -> str:
    if role == "assistant":
        return AGENT
    if role == "user":
        return speaker or USER
    return TOOL if role == "tool" else SYSTEM


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
