"""Recording: wrappers around a run's providers and input reader that write a cassette.

`Recorder.providers(factory)` wraps every provider the factory makes: each event passes
through unchanged, and when the turn ends one line is appended with the masked request,
the masked events and their times. `Recorder.reader(reader)` appends one line per message
the reader returns (None = end of input). The engine sees no difference.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Literal

from awf_nb.engine.ports import (
    Confirmer,
    Final,
    InputReader,
    ModelLoad,
    Notice,
    Provider,
    ProviderEvent,
    ProviderFactory,
    SessionId,
    TextDelta,
    ToolCall,
    ToolUse,
    TurnRequest,
)
from awf_nb.errors import AwfError
from awf_nb.providers.cassette.tape import (
    CassetteWriter,
    End,
    RecordedTurn,
    TimedEvent,
    confirm_line,
    fingerprint,
    header,
    request_summary,
)
from awf_nb.secrets import Masker, StreamMasker

# The clock turn times are measured with; a module attribute so tests can fake it.
clock: Callable[[], float] = time.monotonic


class Recorder:
    """One run's recording into the cassette at `path` (created, with its header, at once:
    a path that cannot be written fails before the run starts)."""

    def __init__(self, path: str | os.PathLike[str], *, workflow: str, masker: Masker) -> None:
        self.writer = CassetteWriter.create(path, header(workflow))
        self.masker = masker  # the run's own: secrets it learns later are masked too

    def providers(self, factory: ProviderFactory) -> RecordingProviders:
        return RecordingProviders(self, factory)

    def reader(self, reader: InputReader | None) -> InputReader | None:
        """`reader`, recorded; None stays None (a run without input reads nothing)."""
        if reader is None or isinstance(reader, RecordingReader):
            return reader
        if isinstance(reader, Confirmer):
            return RecordingConfirmingReader(self, reader)
        return RecordingReader(self, reader)


class RecordingProviders:
    """A `ProviderFactory` whose providers are recorded (`cassette` gives the recorder)."""

    def __init__(self, recorder: Recorder, factory: ProviderFactory) -> None:
        self.cassette = recorder
        self._factory = factory
        self._closed: set[int] = set()  # aliases share an instance: close it once

    def __call__(self, name: str) -> Provider:
        return RecordingProvider(name, self._factory(name), self)

    async def close(self, provider: Provider) -> None:
        if id(provider) not in self._closed:
            self._closed.add(id(provider))
            await provider.aclose()


class RecordingProvider:
    """Passes a provider's events through and records each turn when it ends."""

    def __init__(self, name: str, inner: Provider, owner: RecordingProviders) -> None:
        # The name the workflow asked for (`openai`, not `openai_compatible`): replay is
        # asked by the same name, and never consults the registry.
        self.name = name
        self.inner = inner
        self._owner = owner
        self._recorder = owner.cassette

    @property
    def session_kind(self) -> Literal["history", "session_id"]:
        return self.inner.session_kind

    async def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
        tape = _TurnTape(self, turn)
        events = self.inner.stream(turn)
        try:
            async for event in events:
                tape.add(event)
                yield event
        except AwfError as exc:
            with contextlib.suppress(AwfError):  # the provider's error is the one to show
                tape.failed(exc)
            raise
        except GeneratorExit:
            # The engine stopped reading (a reply over max_reply_bytes): replaying the same
            # events makes it stop at the same one, so the turn is recorded as it went.
            tape.write()
            raise
        except BaseException:
            # Cancelled (Ctrl-C on a reply, a timeout) or a bug below: the partial turn is
            # kept so the cassette shows what happened, but it cannot be replayed. A failing
            # write must not hide the reason the turn stopped.
            tape.end = "interrupted"
            with contextlib.suppress(AwfError):
                tape.write()
            raise
        finally:
            await events.aclose()  # type: ignore[attr-defined]
        tape.write()

    async def aclose(self) -> None:
        await self._owner.close(self.inner)


class _TurnTape:
    """The masked events of one turn as they stream, and the line that records them."""

    def __init__(self, provider: RecordingProvider, turn: TurnRequest) -> None:
        self.recorder = provider._recorder
        masker = self.recorder.masker
        summary = request_summary(provider.name, turn, masker)
        self.turn = RecordedTurn(
            provider=provider.name,
            session_kind=provider.session_kind,
            step=turn.step,
            speaker=turn.speaker,
            turn=turn.turn_number,
            fingerprint=fingerprint(summary),
            request=summary,
        )
        self.masker = masker
        # Text is masked as a stream: a secret split across deltas must not leak in pieces.
        self.text: StreamMasker = masker.stream()
        self.started = clock()
        self.last_text_at = 0.0
        self.end: End = "complete"
        self._written = False

    def _at(self) -> float:
        return round(max(clock() - self.started, 0.0), 4)

    def add(self, event: ProviderEvent) -> None:
        if isinstance(event, ModelLoad):
            return  # about this process, not the conversation: a replay loads no model
        at = self._at()
        if isinstance(event, TextDelta):
            self.last_text_at = at
            if shown := self.text.feed(event.text):
                self.turn.events.append(TimedEvent(at, TextDelta(shown)))
            return
        self._flush_text()
        mask = self.masker.mask
        match event:
            case ToolUse(name=name, argument=argument):
                event = ToolUse(name, mask(argument))
            case ToolCall(id=call_id, name=name, arguments=arguments):
                event = ToolCall(call_id, name, mask(arguments))
            case SessionId(session_id=session_id):
                event = SessionId(mask(session_id))
            case Notice(message=message, truncated_turns=truncated):
                event = Notice(mask(message), truncated)
            case Final(text=text):
                event = Final(mask(text))
        self.turn.events.append(TimedEvent(at, event))

    def _flush_text(self) -> None:
        # Text held back as a possible start of a secret belongs before the next event.
        if tail := self.text.flush():
            self.turn.events.append(TimedEvent(self.last_text_at, TextDelta(tail)))

    def failed(self, exc: AwfError) -> None:
        self.end = "error"
        mask = self.masker.mask
        self.turn.error = {
            "message": mask(exc.message),
            "hint": None if exc.hint is None else mask(exc.hint),
            "retryable": bool(getattr(exc, "retryable", False)),
            "retry_after": getattr(exc, "retry_after", None),
            "exit_code": exc.exit_code,
            "at": self._at(),
        }
        self.write()

    def write(self) -> None:
        if self._written:
            return
        self._written = True
        self._flush_text()
        self.turn.end = self.end
        self.recorder.writer.append(self.turn.to_line())


class RecordingReader:
    """An `InputReader` that records each message its reader returns, masked."""

    def __init__(self, recorder: Recorder, inner: InputReader) -> None:
        self.recorder = recorder
        self.inner = inner

    async def read(self, prompt: str) -> str | None:
        text = await self.inner.read(prompt)
        masked = None if text is None else self.recorder.masker.mask(text)
        self.recorder.writer.append({"type": "input", "text": masked})
        return text


class RecordingConfirmingReader(RecordingReader):
    """A recording reader whose reader also answers tool-call confirmations: recorded too."""

    inner: Confirmer  # type: ignore[assignment]

    async def confirm(self, question: str) -> bool | None:
        allowed = await self.inner.confirm(question)
        # Bound to the call it answers (its tool and arguments): a replay uses a recorded
        # answer only for the very same call, and never as an approval (replay.py).
        self.recorder.writer.append(confirm_line(question, allowed, self.recorder.masker))
        return allowed
