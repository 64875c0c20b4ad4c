"""The conversation of a run as data: every message in order, who said it, in which step
and turn, its text, tokens, start time and duration (`RunResult.exchange`, `awf status
--json`), read from the run's transcript — or, for a run kept without storage, from the
conversations its state holds.

`speaker` is `agent` for a step's agent, a partner's name (`reviewer`, `user
(simulated)`), `user` for the person or the step's prompt (the first `user` message of a
step's visit), `tool` for a tool call or result, `system` for a system prompt. `turn` is
the number of the agent reply a message belongs to: a reply is turn N, the message it
answers too (a step's turns count on across its visits when its session continues).
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
        return _from_records(records)
    return _from_state(state)


class _Numbering:
    """The reply number of each message of one step: a reply answers the user message
    before it (the rounds after its tool results are the same reply)."""

    def __init__(self) -> None:
        self.replies = 0
        self.waiting = False  # a user message has no reply yet

    def number(self, role: str) -> int:
        if role == "user":
            self.waiting = True
            return self.replies + 1
        if role == "assistant":
            if self.waiting:
                self.replies += 1
                self.waiting = False
            return self.replies
        return self.replies + 1 if self.waiting else self.replies


def _from_records(records: list[Mapping[str, Any]]) -> list[ExchangeTurn]:
    numbering: dict[str, _Numbering] = {}
    found: list[ExchangeTurn] = []
    for record in records:
        step, role = str(record.get("step", "")), str(record.get("role", ""))
        if not step or role not in ("user", "assistant", "tool", "system"):
            continue
        number = numbering.setdefault(step, _Numbering()).number(role)
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
        for turn in conv.turns:
            found.append(
                ExchangeTurn(
                    step=step,
                    turn=numbering.number(turn.role),
                    speaker=_speaker(turn.role, turn.speaker),
                    role=turn.role,
                    text=turn.content,
                    tokens=turn.tokens,
                    duration=turn.duration,
                    interrupted=turn.interrupted,
                )
            )
    return found


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
