"""What stands between a run and its frontend (the `EventSink`): masking every event, and
the sink of a called workflow.

`EventMasker` is the net under every event a run emits (`Runner.emit` applies it before
any sink sees the event): each text field — a warning naming a provider URL, a tool's
arguments, a step's output — goes through the run's `Masker`. Streamed text (`AgentText`,
`StepOutput`) has already been through a `StreamMasker`, which holds back a secret split
across chunks; masking a chunk it let through again changes nothing (a chunk it let
through holds no whole secret), so that stays exact. A secret learned after a stream
began (provider options rendered mid-run) is caught here in every chunk that holds it
whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from awf_nb.engine import events as ev
from awf_nb.engine.ports import EventSink
from awf_nb.secrets import Masker

# Per event class: the fields that can carry text (all but the run id, which is ours).
_MASKED_FIELDS: dict[type, tuple[str, ...]] = {}
# Labels found to hold no secret (step names, speakers: the same on every token) are
# remembered, up to this many; the memory is dropped when the masker learns a secret.
_LABELS = frozenset({"step", "speaker", "workflow", "kind", "mode", "detail", "name", "stream"})
_CLEAN_MEMORY = 256
_SHORT = 64


class EventMasker:
    """Masks events with one run's `Masker` (`Runner.emit` owns one; `mask_event` is the
    one-off form). Most text holds no secret; finding that out cheaply is what lets every
    streamed token go through here. The masking itself stays the Masker's."""

    __slots__ = ("_clean", "_masker", "_secrets")

    def __init__(self, masker: Masker) -> None:
        self._masker = masker
        self._secrets: tuple[str, ...] = ()
        self._clean: set[str] = set()

    def __call__(self, event: ev.RunEvent) -> ev.RunEvent:
        """`event` with every secret in its text replaced by `***` (the same event when
        none)."""
        secrets = self._masker.secrets
        if not secrets:
            return event
        if secrets is not self._secrets:  # a secret was learned: forget what was clean
            self._secrets, self._clean = secrets, set()
        names = _MASKED_FIELDS.get(type(event))
        if names is None:
            names = _MASKED_FIELDS[type(event)] = tuple(
                f.name for f in dataclasses.fields(event) if f.name != "run_id"
            )
        changes: dict[str, Any] = {}
        clean = self._clean
        for name in names:
            value = getattr(event, name)
            if type(value) is not str:
                masked = self._masked(value)
                if masked is not value:
                    changes[name] = masked
            elif value and value not in clean:  # inline: once per field per streamed token
                for secret in secrets:
                    if secret in value:
                        changes[name] = self._masker.mask(value)
                        break
                else:
                    if name in _LABELS:
                        self._remember(value)
        return dataclasses.replace(event, **changes) if changes else event

    def _remember(self, label: str) -> None:
        if len(label) <= _SHORT:
            if len(self._clean) >= _CLEAN_MEMORY:
                self._clean.clear()
            self._clean.add(label)

    def _holds_secret(self, text: str) -> bool:
        return text not in self._clean and any(secret in text for secret in self._secrets)

    def _masked(self, value: Any) -> Any:
        """`value` masked (the same object when nothing in it changed)."""
        if isinstance(value, str):
            return self._masker.mask(value) if self._holds_secret(value) else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {}
            for f in dataclasses.fields(value):
                item = getattr(value, f.name)
                masked = self._masked(item)
                if masked is not item:
                    changes[f.name] = masked
            return dataclasses.replace(value, **changes) if changes else value
        if type(value) in (dict, list, tuple):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            if all(self._masked(item) is item for _, item in items):
                return value
            if isinstance(value, dict):
                return {key: self._masked(item) for key, item in value.items()}
            return type(value)(self._masked(item) for item in value)
        return value


def mask_event(event: ev.RunEvent, masker: Masker) -> ev.RunEvent:
    """`event` with every secret in its text replaced by `***` (the same event when none)."""
    return EventMasker(masker)(event)


class PrefixSink:
    """Forwards a called workflow's events to its caller, with its steps named
    `call_step.child_step` (the called run's own start and end are not shown)."""

    def __init__(self, sink: EventSink, prefix: str) -> None:
        self._sink = sink
        self._prefix = prefix

    def emit(self, event: ev.RunEvent) -> None:
        if isinstance(event, ev.RunStarted | ev.RunFinished):
            return
        step = getattr(event, "step", None)
        if step is not None:
            prefixed = f"{self._prefix}.{step}" if step else self._prefix
            event = dataclasses.replace(event, step=prefixed)
        self._sink.emit(event)
