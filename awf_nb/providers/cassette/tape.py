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
    {"type": "confirm", "allowed": true}            (an answer to allow a tool call)

`request` is the masked summary of what the provider was asked (`request_summary`); the
fingerprint is the sha256 of its canonical JSON. Every text in the file is masked with the
run's `Masker` before it is written, so a cassette never holds a secret.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
            turn=int(line["turn"]),
            fingerprint=str(line["fingerprint"]),
            request=dict(line["request"]),
            events=[event_from_json(e) for e in line["events"]],
            end=line["end"],
            error=dict(line["error"]) if line.get("error") is not None else None,
        )


_ENDS = ("complete", "error", "interrupted")


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
        case Final(text=text):
            return {"at": at, "final": text}
    raise TypeError(f"not a provider event: {event!r}")


def event_from_json(data: Mapping[str, Any]) -> TimedEvent:
    at = float(data["at"])
    if not math.isfinite(at) or at < 0:
        raise ValueError(f"bad time {at}")
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
        event = Usage(int(u["input_tokens"]), int(u["output_tokens"]), bool(u["estimated"]),
                      None if u["cost_usd"] is None else float(u["cost_usd"]))  # fmt: skip
    elif "session_id" in data:
        event = SessionId(str(data["session_id"]))
    elif "notice" in data:
        event = Notice(str(data["notice"]["message"]), int(data["notice"]["truncated_turns"]))
    elif "final" in data:
        event = Final(str(data["final"]))
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


@dataclass
class Cassette:
    """A cassette read back: its header, provider turns and person messages, in order."""

    path: Path
    workflow: str
    turns: list[RecordedTurn]
    inputs: list[str | None]
    # the person's answers to tool-call confirmations (None: no answer), in order
    confirms: list[bool | None] = field(default_factory=list)


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and check a whole cassette before anything runs (errors name the line)."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(
            f"cassette {source} not found", hint="record one with --record PATH"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cannot read the cassette {source}: {_reason(exc)}") from None
    lines = text.splitlines()
    head = _json_line(lines[0]) if lines else None
    if not isinstance(head, dict) or head.get("type") != "header" or head.get("format") != FORMAT:
        raise CassetteError(
            f"{source} is not an awf cassette (its first line is not a cassette header)",
            hint="a cassette is written by `awf run WORKFLOW --record PATH`",
        )
    if head.get("version") != VERSION:
        raise CassetteError(
            f"{source} is a version {head.get('version')} cassette; this awf-nb reads "
            f"version {VERSION}",
            hint="record the run again with --record",
        )
    cassette = Cassette(source, str(head.get("workflow", "")), [], [])
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        line = _json_line(raw)
        try:
            if not isinstance(line, dict):
                raise ValueError("not a JSON object")
            if line.get("type") == "turn":
                cassette.turns.append(RecordedTurn.from_line(line))
            elif line.get("type") == "input":
                value = line["text"]
                cassette.inputs.append(None if value is None else str(value))
            elif line.get("type") == "confirm":
                allowed = line["allowed"]
                if allowed not in (True, False, None):
                    raise ValueError("allowed must be true, false or null")
                cassette.confirms.append(allowed)
            else:
                raise ValueError(f"unknown line type {line.get('type')!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise CassetteError(
                f"{source}:{number}: not a valid cassette line ({_what(exc)})",
                hint="the file may have been edited by hand; record the run again",
            ) from None
    return cassette


def _json_line(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _what(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)
