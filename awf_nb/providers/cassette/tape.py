"""The cassette file: what one line holds, how a request is fingerprinted, reading, writing.

A cassette is JSON Lines, one object per line, written as the run goes:

    {"type": "header", "format": "awf-cassette", "version": 1, "workflow": "chat", ...}
    {"type": "turn", "provider": "scripted", "session_kind": "history", "step": "chat",
     "speaker": "", "turn": 1, "fingerprint": "<sha256>", "request": {...},
     "events": [{"at": 0.0012, "text": "Hel"}, ..., {"at": 0.02, "final": "Hello"}],
     "end": "complete"}
    (a tool call the model asked for is an event {"at": …, "tool_call": {"id", "name",
     "arguments"}}; the request of a turn with tools holds "tools", of a tool round
     "continues": true)
    {"type": "input", "text": "tell me more"}       (a person's message; null = end of input)
    {"type": "confirm", "allowed": true, "tool": "Bash", "arguments_sha256": "<sha256>"}
                                  (the person's answer to allow one tool call, bound to it)

`request` is the masked summary of what the provider was asked (`request_summary`); the
fingerprint is the sha256 of its canonical JSON. Every text in the file is masked with the
run's `Masker` before it is written, so a cassette never holds a secret.

A cassette is untrusted input: reading it refuses what JSON does not allow (`NaN`,
`Infinity`), numbers that mean nothing here (a negative token count, an endless time) and
lines nested too deeply, naming the file and the line. What a replay lets a cassette do is
in replay.py (a recorded approval never approves a tool call by itself).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from awf_nb.engine.ports import (
    Final,
    Message,
    Notice,
    ProviderEvent,
    SessionId,
    TextDelta,
    ToolCall,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.errors import AwfSystemError, UserError
from awf_nb.secrets import Masker
from awf_nb.workflow.files import open_regular

FORMAT = "awf-cassette"
VERSION = 1

# Options that do not change what a model answers: where and how it is reached (a cassette
# recorded against one server replays for another), machine-specific tuning, pacing, and
# the environment given to agent CLIs (paths and credentials of the machine that recorded).
# Every other option is part of the fingerprint. Secret-named options are masked anyway.
IGNORED_OPTIONS = frozenset(
    {
        "base_url", "api_key", "headers", "timeout", "connect_timeout", "read_timeout",
        "threads", "delay_ms", "env",
    }
)  # fmt: skip

End = Literal["complete", "error", "interrupted"]


class CassetteError(UserError):
    """A cassette cannot be used: missing, unreadable, not a cassette, another version, or
    it does not hold the turn a replayed run asks for. Exit code 1 (the person's file)."""


class CassetteMismatch(CassetteError):
    """A replayed run asked a provider something the recording does not hold."""


# --- the request -------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, text as is (what gets hashed)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _line_json(line: Mapping[str, Any]) -> str:
    # Keys in the order they were built ("type" first): lines a person can read.
    return json.dumps(dict(line), separators=(",", ":"), ensure_ascii=False, default=str)


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def request_summary(provider: str, turn: TurnRequest, masker: Masker) -> dict[str, Any]:
    """What of a request can change the answer, masked: provider, prompt, system prompt,
    history (its length and hash: a long conversation must not make each line resend every
    message), whether a session is resumed, the options but `IGNORED_OPTIONS`, and in chat
    mode the tools (names, and a hash of names, descriptions and schemas) and whether the
    turn is a tool round.

    The run id, working directory, timeout and environment are left out: they differ from
    run to run and machine to machine without changing what is asked. Keys about tools are
    only there when a turn has them, so cassettes recorded before tools existed (and turns
    without tools) keep their fingerprints.
    """
    history = [_history_entry(m, masker) for m in turn.history]
    options = {k: v for k, v in turn.options.items() if k not in IGNORED_OPTIONS}
    summary: dict[str, Any] = {
        "provider": provider,
        "prompt": masker.mask(turn.prompt),
        "system_prompt": None if turn.system_prompt is None else masker.mask(turn.system_prompt),
        "history": {"messages": len(history), "sha256": _sha256(history)},
        "session_id": bool(turn.session_id),
        "options": masker.mask_data(options),
    }
    if turn.tools:
        specs = [[t.name, t.description, t.parameters] for t in turn.tools]
        summary["tools"] = {
            "names": [t.name for t in turn.tools],
            "sha256": _sha256(masker.mask_data(specs)),
        }
    if turn.continues:
        summary["continues"] = True
    return summary


def _history_entry(message: Message, masker: Masker) -> list[Any]:
    """`[role, content]`, plus the calls of an assistant message or the call a tool message
    answers (a plain message keeps the form it had before tools, and so its hash)."""
    entry: list[Any] = [message.role, masker.mask(message.content)]
    if message.tool_calls:
        calls = [[c.id, c.name, masker.mask(c.arguments)] for c in message.tool_calls]
        entry.append(calls)
    if message.role == "tool":
        entry += [message.tool_call_id, message.name]
    return entry


def fingerprint(summary: Mapping[str, Any]) -> str:
    return _sha256(summary)


# --- one recorded turn -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimedEvent:
    at: float  # seconds since the turn started
    event: ProviderEvent


@dataclass
class RecordedTurn:
    provider: str
    session_kind: Literal["history", "session_id"]
    step: str
    speaker: str
    turn: int
    fingerprint: str
    request: dict[str, Any]
    events: list[TimedEvent] = field(default_factory=list)
    end: End = "complete"
    error: dict[str, Any] | None = None  # message, hint, retryable, retry_after, exit_code

    def to_line(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "type": "turn",
            "provider": self.provider,
            "session_kind": self.session_kind,
            "step": self.step,
            "speaker": self.speaker,
            "turn": self.turn,
            "fingerprint": self.fingerprint,
            "request": self.request,
            "events": [event_to_json(e) for e in self.events],
            "end": self.end,
        }
        if self.error is not None:
            line["error"] = self.error
        return line

    @classmethod
    def from_line(cls, line: Mapping[str, Any]) -> RecordedTurn:
        kind = line["session_kind"]
        if kind not in ("history", "session_id") or line["end"] not in _ENDS:
            raise ValueError("unknown session kind or end")
        return cls(
            provider=str(line["provider"]),
            session_kind=kind,
            step=str(line["step"]),
            speaker=str(line["speaker"]),
            turn=_count(line["turn"], "turn"),
            fingerprint=str(line["fingerprint"]),
            request=dict(line["request"]),
            events=[event_from_json(e) for e in line["events"]],
            end=line["end"],
            error=dict(line["error"]) if line.get("error") is not None else None,
        )


_ENDS = ("complete", "error", "interrupted")


def _count(value: Any, name: str) -> int:
    """A whole number >= 0 (a token count, a turn number), as the recorder wrote it."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name} must be a number")
    number = _number(value, name)
    if not number.is_integer():
        raise ValueError(f"{name} must be a whole number (got {_shown(value)})")
    return int(number)


def _number(value: Any, name: str) -> float:
    """A finite number >= 0 (a time, a cost)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number")
    number = float(value)  # a string that is no number: ValueError
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (got {_shown(value)})")
    return number


def event_to_json(timed: TimedEvent) -> dict[str, Any]:
    at, event = timed.at, timed.event
    match event:
        case TextDelta(text=text):
            return {"at": at, "text": text}
        case ToolUse(name=name, argument=argument):
            return {"at": at, "tool_use": {"name": name, "argument": argument}}
        case ToolCall(id=call_id, name=name, arguments=arguments):
            return {"at": at, "tool_call": {"id": call_id, "name": name, "arguments": arguments}}
        case Usage():
            usage = {"input_tokens": event.input_tokens, "output_tokens": event.output_tokens,
                     "estimated": event.estimated, "cost_usd": event.cost_usd}  # fmt: skip
            return {"at": at, "usage": usage}
        case SessionId(session_id=session_id):
            return {"at": at, "session_id": session_id}
        case Notice(message=message, truncated_turns=truncated):
            return {"at": at, "notice": {"message": message, "truncated_turns": truncated}}
        case Final(text=text, cut=cut):
            return {"at": at, "final": text, "cut": True} if cut else {"at": at, "final": text}
    raise TypeError(f"not a provider event: {event!r}")


def event_from_json(data: Mapping[str, Any]) -> TimedEvent:
    at = _number(data["at"], "at")
    event: ProviderEvent
    if "text" in data:
        event = TextDelta(str(data["text"]))
    elif "tool_use" in data:
        event = ToolUse(str(data["tool_use"]["name"]), str(data["tool_use"]["argument"]))
    elif "tool_call" in data:
        call = data["tool_call"]
        event = ToolCall(str(call["id"]), str(call["name"]), str(call["arguments"]))
    elif "usage" in data:
        u = data["usage"]
        cost = None if u["cost_usd"] is None else _number(u["cost_usd"], "cost_usd")
        event = Usage(_count(u["input_tokens"], "input_tokens"),
                      _count(u["output_tokens"], "output_tokens"), bool(u["estimated"]),
                      cost)  # fmt: skip
    elif "session_id" in data:
        event = SessionId(str(data["session_id"]))
    elif "notice" in data:
        event = Notice(str(data["notice"]["message"]), int(data["notice"]["truncated_turns"]))
    elif "final" in data:
        event = Final(str(data["final"]), cut=data.get("cut") is True)
    else:
        raise ValueError(f"unknown event {sorted(data)}")
    return TimedEvent(at, event)


# --- writing ---------------------------------------------------------------------------------


class CassetteWriter:
    """Appends lines to a cassette file. Each line is one `write` on a file opened for
    appending and closed again: nothing is buffered, so a crash keeps every line written,
    and there is no file to close when the run ends."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, path: str | os.PathLike[str], header: Mapping[str, Any]) -> CassetteWriter:
        """A new cassette at `path` (an existing file is replaced), its header written."""
        target = Path(path)
        try:
            with target.open("w", encoding="utf-8") as out:
                out.write(_line_json(header) + "\n")
        except OSError as exc:
            raise CassetteError(f"cannot write the cassette {target}: {_reason(exc)}") from None
        return cls(target)

    def append(self, line: Mapping[str, Any]) -> None:
        data = (_line_json(line) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise AwfSystemError(
                f"cannot write to the cassette {self.path}: {_reason(exc)}"
            ) from None


def header(workflow: str) -> dict[str, Any]:
    from awf_nb._version import __version__

    return {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "workflow": workflow,
        "awf_nb": __version__,
    }


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedConfirm:
    """The person's answer to a tool call's confirmation (None: no answer, end of input),
    bound to the call it answered: the tool's name and the sha256 of its masked arguments.
    Lines written before answers were bound have neither (`tool` is None)."""

    allowed: bool | None
    tool: str | None = None
    arguments_sha256: str | None = None

    def to_line(self) -> dict[str, Any]:
        return {
            "type": "confirm",
            "allowed": self.allowed,
            "tool": self.tool,
            "arguments_sha256": self.arguments_sha256,
        }

    @classmethod
    def from_line(cls, line: Mapping[str, Any]) -> RecordedConfirm:
        allowed = line["allowed"]
        if allowed not in (True, False, None):
            raise ValueError("allowed must be true, false or null")
        tool, digest = line.get("tool"), line.get("arguments_sha256")
        if (tool is None) != (digest is None) or not all(
            value is None or isinstance(value, str) for value in (tool, digest)
        ):
            raise ValueError("tool and arguments_sha256 must be texts given together")
        return cls(allowed, tool, digest)

    def answers(self, question: str) -> bool:
        """Whether this is the answer to `question` (the very same call)."""
        return self.tool is not None and (self.tool, self.arguments_sha256) == confirmed_call(
            question
        )


# The engine asks `Allow NAME(ARGUMENTS)?` (engine/tool_calls.py), ARGUMENTS masked; a tool
# name never holds "(" (tool names are [A-Za-z0-9_-]).
_QUESTION = re.compile(r"Allow (?P<tool>[^(]*)\((?P<arguments>.*)\)\?", re.DOTALL)


def confirmed_call(question: str) -> tuple[str, str]:
    """The tool a confirmation question asks about and the sha256 of its arguments (a
    question of another form: "" and the sha256 of the whole question)."""
    match = _QUESTION.fullmatch(question)
    if match is None:
        return "", hashlib.sha256(question.encode()).hexdigest()
    return match["tool"], hashlib.sha256(match["arguments"].encode()).hexdigest()


def confirm_line(question: str, allowed: bool | None, masker: Masker) -> dict[str, Any]:
    """The cassette line of the answer `allowed` to `question`, bound to its call."""
    tool, digest = confirmed_call(masker.mask(question))
    return RecordedConfirm(allowed, tool, digest).to_line()


@dataclass
class Cassette:
    """A cassette read back: its header, provider turns and person messages, in order."""

    path: Path
    workflow: str
    turns: list[RecordedTurn]
    inputs: list[str | None]
    # the person's answers to tool-call confirmations, in order
    confirms: list[RecordedConfirm] = field(default_factory=list)


# What `read_cassette` reports as a line that cannot be used: the JSON module's errors, a
# missing key, a value of the wrong type, a number too large for an integer.
_BAD_LINE = (KeyError, TypeError, ValueError, OverflowError)


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and check a whole cassette before anything runs (errors name the line)."""
    source = Path(path)
    try:
        with open_regular(source) as file:  # a FIFO or a device is refused, not waited on
            text = file.read().decode("utf-8")
    except FileNotFoundError:
        raise CassetteError(
            f"cassette {source} not found", hint="record one with --record PATH"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cannot read the cassette {source}: {_reason(exc)}") from None
    lines = text.splitlines()
    try:
        head = _json_line(lines[0]) if lines else None
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("type") != "header" or head.get("format") != FORMAT:
        raise CassetteError(
            f"{source} is not an awf cassette (its first line is not a cassette header)",
            hint="a cassette is written by `awf run WORKFLOW --record PATH`",
        )
    if head.get("version") != VERSION:
        raise CassetteError(
            f"{source} is a version {_shown(head.get('version'))} cassette; this awf-nb "
            f"reads version {VERSION}",
            hint="record the run again with --record",
        )
    cassette = Cassette(source, str(head.get("workflow", "")), [], [])
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            line = _json_line(raw)
            if not isinstance(line, dict):
                raise ValueError("not a JSON object")
            if line.get("type") == "turn":
                cassette.turns.append(RecordedTurn.from_line(line))
            elif line.get("type") == "input":
                value = line["text"]
                cassette.inputs.append(None if value is None else str(value))
            elif line.get("type") == "confirm":
                cassette.confirms.append(RecordedConfirm.from_line(line))
            else:
                raise ValueError(f"unknown line type {_shown(line.get('type'))}")
        except _BAD_LINE as exc:
            raise CassetteError(
                f"{source}:{number}: not a valid cassette line ({_what(exc)})",
                hint="the file may have been edited by hand; record the run again",
            ) from None
    return cassette


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows")


def _json_line(raw: str) -> Any:
    """One line's JSON value. ValueError for text that is not JSON, for `NaN` and
    `Infinity` (Python reads them, JSON has no such numbers), and for nesting too deep for
    the parser."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _shown(value: Any) -> str:
    """A value of the file in a message: short, on one line, control characters escaped."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _what(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)
