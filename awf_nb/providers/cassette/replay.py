"""Replay: a provider factory and an input reader that serve a run from its cassette.

No real provider is made: `Replayer.providers()` is a `ProviderFactory` of its own, whose
providers answer each turn with the recorded events (paced at `speed` times the recorded
delays; 0 = at once). A turn is matched within its step and speaker: it gets the earliest
recorded turn not served yet with the same turn number and fingerprint. When there is
none, the run stops with `CassetteMismatch`, comparing the request with the earliest
recorded turn not served yet (what differs: provider, prompt, system prompt, history,
session, options, tools, tool round or not, turn number), or saying the recording ends there.
`Replayer.reader(reader)` serves the recorded person messages in order, then `reader`.

A cassette is untrusted input, like a model: the fingerprint covers what was asked, not
what is answered, so an edited file can make the replayed model call any tool the step
offers. Tool-call confirmations are therefore never answered yes by the file: a recorded
refusal of the very same call (tool and arguments) is replayed, as refusing is always
safe; anything else is asked of the person (the run's own reader), and a run with nobody
to ask fails with a clear error unless it was started with `--yes`.

When the run ends, `Replayer.unused` says what the replay did not use (turns, messages;
answers too, for information): a replay that took another way than the recording. A
completed run warns about it (`end_warnings`), and an evaluation counts it as a mismatch.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from awf_nb.engine.ports import Confirmer, InputReader, ProviderEvent, TurnRequest
from awf_nb.errors import ProviderError, UserError
from awf_nb.providers.cassette.tape import (
    CassetteError,
    CassetteMismatch,
    RecordedConfirm,
    RecordedTurn,
    fingerprint,
    read_cassette,
    request_summary,
)
from awf_nb.secrets import Masker

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState

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
        self._inputs = list(self.cassette.inputs)  # the messages not read yet
        self._answered: set[int] = set()  # indexes of the recorded answers used
        # What stopped the replay where the run asked something the recording does not
        # hold (each `CassetteMismatch` raised, in words): the run's replay report.
        self.mismatches: list[str] = []

    def providers(self) -> ReplayProviders:
        return ReplayProviders(self)

    def reader(self, reader: InputReader | None) -> InputReader | None:
        """Recorded messages first, then `reader`. Without recorded messages or answers
        `reader` is kept as it is (None included: a run without input must stay one)."""
        if isinstance(reader, ReplayReader) or not (self._inputs or self.cassette.confirms):
            return reader
        if self.cassette.confirms or isinstance(reader, Confirmer):
            return ReplayConfirmingReader(self, reader)
        return ReplayReader(self, reader)

    def next_input(self) -> tuple[bool, str | None]:
        """(True, the next recorded message) or (False, None) once they are all read."""
        if self._inputs:
            return True, self._inputs.pop(0)
        return False, None

    def recorded_answer(self, question: str) -> RecordedConfirm | None:
        """The earliest recorded answer not used yet to the very call `question` asks
        about (tool and arguments), marked used; None when the cassette holds none."""
        for index, answer in enumerate(self.cassette.confirms):
            if index not in self._answered and answer.answers(question):
                self._answered.add(index)
                return answer
        return None

    @property
    def unused(self) -> Unused:
        """What of the cassette this replay has not used so far: turns (with where they
        are), messages of the person, answers to tool-call confirmations."""
        waiting: dict[tuple[str, str], list[int]] = {}
        for index, turn in enumerate(self.cassette.turns):
            if index not in self._served:
                waiting.setdefault((turn.step, turn.speaker), []).append(turn.turn)
        where: list[str] = []
        for (step, speaker), numbers in waiting.items():
            who = f"{speaker}'s " if speaker else ""
            where.append(f"step {step}: {who}{_numbers('turn', numbers)}")
        return Unused(
            turns=len(self.cassette.turns) - len(self._served),
            of_turns=len(self.cassette.turns),
            inputs=len(self._inputs),
            of_inputs=len(self.cassette.inputs),
            answers=len(self.cassette.confirms) - len(self._answered),
            where=tuple(where),
        )

    def end_warnings(self, state: RunState) -> list[str]:
        """When a run ends: a warning for a completed run that left part of the cassette
        unused (a failed run has said what went wrong already)."""
        unused = self.unused
        if state.status != "completed" or not unused:
            return []
        where = self.cassette.path
        return [
            f"the replay did not use everything recorded in {where}: {unused.describe()} "
            "(the replayed run differs from the recorded one)"
        ]

    def session_kind(self, provider: str) -> Literal["history", "session_id"]:
        try:
            return self._session_kind(provider)
        except CassetteMismatch as exc:
            self.mismatches.append(exc.message)
            raise

    def _session_kind(self, provider: str) -> Literal["history", "session_id"]:
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
        try:
            return self._take(provider, turn)
        except CassetteMismatch as exc:
            self.mismatches.append(exc.message)
            raise

    def _take(self, provider: str, turn: TurnRequest) -> RecordedTurn:
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

    def __init__(self, replayer: Replayer, inner: InputReader | None) -> None:
        self._replayer = replayer  # one sequence of recorded messages per run
        self.inner = inner

    async def read(self, prompt: str) -> str | None:
        recorded, text = self._replayer.next_input()
        if recorded:
            await asyncio.sleep(0)  # a suspension point, so cancellation can land here
            return text
        if self.inner is None:
            return None
        return await self.inner.read(prompt)


class ReplayConfirmingReader(ReplayReader):
    """A replay reader that also answers tool-call confirmations, without ever letting the
    cassette approve one: a recorded refusal of the very same call is replayed; otherwise
    the run's own reader asks the person, and with nobody to ask the step fails with a
    clear error (`--yes` allows such calls without asking anyone)."""

    async def confirm(self, question: str) -> bool | None:
        await asyncio.sleep(0)  # a suspension point, as for a message
        recorded = self._replayer.recorded_answer(question)
        if recorded is not None and recorded.allowed is not True:
            return recorded.allowed
        if isinstance(self.inner, Confirmer):
            return await self.inner.confirm(question)
        cassette = self._replayer.cassette.path
        what = (
            f"the cassette {cassette} allows {question.removeprefix('Allow ').rstrip('?')}, "
            "a tool call that needs the person's confirmation; a replay never takes an "
            "approval from a cassette"
            if recorded is not None
            else f"{question.removeprefix('Allow ').rstrip('?')} needs the person's "
            f"confirmation, and the cassette {cassette} holds no answer for this call"
        )
        raise CassetteError(
            f"{what}, and nobody can be asked in this run",
            hint="replay with --yes to allow the step's confirm tools (only for a cassette "
            "you trust: its replies choose the calls), or replay it where you can answer",
        )


@dataclass(frozen=True, slots=True)
class Unused:
    """What of a cassette a replay did not use: provider turns (of `of_turns`, with where
    they are), person messages (of `of_inputs`), and answers to tool-call confirmations.
    False when the replay used every turn and message: answers are left unused by a replay
    with `--yes`, which asks nobody, and say nothing about the run's path."""

    turns: int = 0
    of_turns: int = 0
    inputs: int = 0
    of_inputs: int = 0
    answers: int = 0
    where: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.turns or self.inputs)

    def describe(self) -> str:
        """`2 of 3 recorded turns (step chat: turns 2–3), 1 of 2 recorded messages`."""
        parts = []
        if self.turns:
            parts.append(
                f"{self.turns} of {self.of_turns} recorded turns ({'; '.join(self.where)})"
            )
        if self.inputs:
            parts.append(f"{self.inputs} of {self.of_inputs} recorded messages")
        return ", ".join(parts)


def _numbers(word: str, numbers: list[int]) -> str:
    """`turn 2`, `turns 2–4`, `turns 1, 3–4`: numbers with consecutive runs joined (a
    reply's tool rounds share its turn number: each number once)."""
    numbers = sorted(set(numbers))
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    shown = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
    return f"{word}{'s' if len(numbers) > 1 else ''} {shown}"


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
