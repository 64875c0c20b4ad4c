"""Replay: a provider factory and an input reader that serve a run from its cassette.

No real provider is made: `Replayer.providers()` is a `ProviderFactory` of its own, whose
providers answer each turn with the recorded events (paced at `speed` times the recorded
delays; 0 = at once). A turn is matched within its step and speaker: it gets the earliest
recorded turn not served yet with the same turn number and fingerprint. When there is
none, the run stops with `CassetteMismatch`, comparing the request with the earliest
recorded turn not served yet (what differs: provider, prompt, system prompt, history,
session, options, tools, tool round or not, turn number), or saying the recording ends there.
`Replayer.reader(reader)` serves the recorded person messages in order, then `reader`.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from awf_nb.engine.ports import Confirmer, InputReader, ProviderEvent, TurnRequest
from awf_nb.errors import ProviderError, UserError
from awf_nb.providers.cassette.tape import (
    CassetteError,
    CassetteMismatch,
    RecordedTurn,
    fingerprint,
    read_cassette,
    request_summary,
)
from awf_nb.secrets import Masker

# How replay waits between events; a module attribute so tests can count the pauses.
sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

EXCERPT_CHARS = 60


def check_speed(speed: float) -> float:
    """A replay speed: a finite number >= 0 (it multiplies the recorded delays)."""
    if isinstance(speed, bool) or not isinstance(speed, int | float):
        raise UserError(f"replay speed must be a number >= 0 (got {speed!r})")
    if not math.isfinite(speed) or speed < 0:
        raise UserError(
            f"replay speed must be a number >= 0 (got {speed:g}): 0 replays at once, "
            "1 at the recorded pace"
        )
    return float(speed)


class Replayer:
    """One run served from the cassette at `path` (read and checked at once)."""

    def __init__(
        self, path: str | os.PathLike[str], *, workflow: str, masker: Masker, speed: float = 0.0
    ) -> None:
        self.speed = check_speed(speed)
        self.cassette = read_cassette(path)
        if self.cassette.workflow and self.cassette.workflow != workflow:
            raise CassetteError(
                f"cassette {self.cassette.path} was recorded from workflow "
                f'"{self.cassette.workflow}", not "{workflow}"'
            )
        self.masker = masker
        self._served: set[int] = set()  # indexes of turns already served
        self._inputs = list(self.cassette.inputs)
        self._confirms = list(self.cassette.confirms)

    def providers(self) -> ReplayProviders:
        return ReplayProviders(self)

    def reader(self, reader: InputReader | None) -> InputReader | None:
        """Recorded messages first, then `reader`. Without recorded messages `reader` is
        kept as it is (None included: a run without input must stay one)."""
        if isinstance(reader, ReplayReader) or not (self._inputs or self._confirms):
            return reader
        return ReplayReader(self._inputs, reader, self._confirms)

    def session_kind(self, provider: str) -> Literal["history", "session_id"]:
        for turn in self.cassette.turns:
            if turn.provider == provider:
                return turn.session_kind
        recorded = sorted({t.provider for t in self.cassette.turns})
        raise CassetteMismatch(
            f'cassette {self.cassette.path} has no turns of provider "{provider}" '
            f"(it holds turns of: {', '.join(recorded) or 'none'})",
            hint="record the run again with --record",
        )

    def take(self, provider: str, turn: TurnRequest) -> RecordedTurn:
        """The recorded turn that answers `turn`, marked served; or a clear error."""
        summary = request_summary(provider, turn, self.masker)
        wanted = fingerprint(summary)
        waiting = [
            (index, recorded)
            for index, recorded in enumerate(self.cassette.turns)
            if index not in self._served
            and recorded.step == turn.step
            and recorded.speaker == turn.speaker
        ]
        for index, recorded in waiting:
            if recorded.fingerprint == wanted and recorded.turn == turn.turn_number:
                self._served.add(index)
                return recorded
        where = _where(turn)
        if not waiting:
            turns = self.cassette.turns
            held = sum(t.step == turn.step and t.speaker == turn.speaker for t in turns)
            raise CassetteMismatch(
                f"{where}: the cassette {self.cassette.path} has no more turns for it "
                f"(it recorded {held})",
                hint="the recorded run ended before this turn; record the run again",
            )
        first = waiting[0][1]
        differences = _differences(first, summary, turn.turn_number)
        raise CassetteMismatch(
            f"{where} does not match the cassette {self.cassette.path}: " + "; ".join(differences),
            hint="record the run again with --record, or undo the change",
        )


class ReplayProviders:
    """A `ProviderFactory` that makes replaying providers (and never a real one)."""

    def __init__(self, replayer: Replayer) -> None:
        self.cassette = replayer

    def __call__(self, name: str) -> ReplayProvider:
        return ReplayProvider(name, self.cassette)


class ReplayProvider:
    """Answers turns from the cassette, with the session kind the provider had."""

    def __init__(self, name: str, replayer: Replayer) -> None:
        self.name = name
        # The engine continues conversations the way the recorded provider did (history or
        # session id), so the requests it makes are the recorded ones.
        self.session_kind = replayer.session_kind(name)
        self._replayer = replayer

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        recorded = self._replayer.take(self.name, turn)
        if recorded.end == "interrupted":
            raise CassetteError(
                f"{_where(turn)} was cut short when it was recorded in "
                f"{self._replayer.cassette.path} (interrupted, timed out or failed), so there "
                "is no reply to replay",
                hint="record the run again without interrupting that reply",
            )
        speed = self._replayer.speed
        previous = 0.0
        for timed in recorded.events:
            if speed and timed.at > previous:
                await sleep((timed.at - previous) * speed)
            previous = max(previous, timed.at)
            yield timed.event
        if recorded.error is not None:
            error = recorded.error
            if speed and float(error.get("at", 0.0)) > previous:
                await sleep((float(error["at"]) - previous) * speed)
            raise ProviderError(
                self.name,
                str(error["message"]),
                prefixed=False,  # recorded as the person saw it, provider name included
                retryable=bool(error.get("retryable")),
                retry_after=error.get("retry_after"),
                exit_code=error.get("exit_code"),
                hint=error.get("hint"),
            )

    async def aclose(self) -> None:
        """Nothing to release."""


class ReplayReader:
    """Serves the recorded person messages in order, then asks the run's own reader (or
    reports end of input when there is none)."""

    def __init__(
        self,
        recorded: list[str | None],
        inner: InputReader | None,
        confirms: list[bool | None] | None = None,
    ) -> None:
        self._recorded = recorded  # shared with the replayer: one sequence per run
        self.inner = inner
        self._confirms = confirms if confirms is not None else []

    async def confirm(self, question: str) -> bool | None:
        """The recorded answers to tool-call confirmations, then the run's own reader's
        (no answer, a refusal, when it cannot ask)."""
        if self._confirms:
            await asyncio.sleep(0)
            return self._confirms.pop(0)
        if isinstance(self.inner, Confirmer):
            return await self.inner.confirm(question)
        return None

    async def read(self, prompt: str) -> str | None:
        if self._recorded:
            await asyncio.sleep(0)  # a suspension point, so cancellation can land here
            return self._recorded.pop(0)
        if self.inner is None:
            return None
        return await self.inner.read(prompt)


def _where(turn: TurnRequest) -> str:
    # "step X: " first, as every step error starts (the engine shows it once, not twice)
    speaker = f"{turn.speaker}'s " if turn.speaker else ""
    return f"step {turn.step}: {speaker}turn {turn.turn_number}"


def _differences(recorded: RecordedTurn, summary: dict[str, Any], turn_number: int) -> list[str]:
    """What differs between a recorded request and the one asked now, in words."""
    was = recorded.request
    found: list[str] = []
    if recorded.turn != turn_number:
        found.append(f"the turn number differs (recorded turn {recorded.turn})")
    for key, label in (("provider", "provider"), ("prompt", "prompt"),
                       ("system_prompt", "system prompt")):  # fmt: skip
        if was.get(key) != summary[key]:
            found.append(
                f"the {label} differs (recorded {_excerpt(was.get(key))}, "
                f"now {_excerpt(summary[key])})"
            )
    if was.get("history") != summary["history"]:
        count = (was.get("history") or {}).get("messages")
        found.append(
            f"the history differs (recorded {count} messages, now "
            f"{summary['history']['messages']}; an earlier reply or message changed)"
        )
    if was.get("session_id") != summary["session_id"]:
        found.append(
            "the session differs (recorded "
            + ("resuming a session" if was.get("session_id") else "a new session")
            + ")"
        )
    options_was, options_now = was.get("options") or {}, summary["options"]
    if options_was != options_now:
        keys = sorted(k for k in {*options_was, *options_now}
                      if options_was.get(k) != options_now.get(k))  # fmt: skip
        found.append(f"the options differ ({', '.join(keys)})")
    tools_was, tools_now = was.get("tools"), summary.get("tools")
    if tools_was != tools_now:
        names_was = (tools_was or {}).get("names") or []
        names_now = (tools_now or {}).get("names") or []
        if names_was == names_now:
            found.append("the tools differ (a description or parameter schema changed)")
        else:
            found.append(
                f"the tools differ (recorded {', '.join(names_was) or 'none'}, "
                f"now {', '.join(names_now) or 'none'})"
            )
    if bool(was.get("continues")) != bool(summary.get("continues")):
        recorded_kind = "a tool round" if was.get("continues") else "a new message"
        found.append(f"the kind of turn differs (recorded {recorded_kind})")
    if not found and recorded.fingerprint != fingerprint(summary):
        found.append("the request differs from its recorded fingerprint (was the cassette edited?)")
    return found


def _excerpt(value: Any) -> str:
    if value is None:
        return "none"
    text = " ".join(str(value).split())
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1] + "…"
    return f'"{text}"'
