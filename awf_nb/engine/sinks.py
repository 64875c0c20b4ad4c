"""What stands between a run and its frontend (the `EventSink`): masking every event, and
the sink of a called workflow.

`mask_event` is the net under every event a run emits (`Runner.emit` applies it before
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


def mask_event(event: ev.RunEvent, masker: Masker) -> ev.RunEvent:
    """`event` with every secret in its text replaced by `***` (the same event when none)."""
    if not masker:
        return event
    cls = type(event)
    names = _MASKED_FIELDS.get(cls)
    if names is None:
        names = _MASKED_FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if f.name != "run_id"
        )
    changes: dict[str, Any] = {}
    for name in names:
        value = getattr(event, name)
        masked = _masked(value, masker)
        if masked is not value:
            changes[name] = masked
    return dataclasses.replace(event, **changes) if changes else event  # type: ignore[type-var]


def _masked(value: Any, masker: Masker) -> Any:
    """`value` masked (the same object when nothing in it changed)."""
    if isinstance(value, str):
        masked = masker.mask(value)
        return value if masked == value else masked
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            masked = _masked(item, masker)
            if masked is not item:
                changes[f.name] = masked
        return dataclasses.replace(value, **changes) if changes else value
    if type(value) in (dict, list, tuple):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        if all(_masked(item, masker) is item for _, item in items):
            return value
        if isinstance(value, dict):
            return {key: _masked(item, masker) for key, item in value.items()}
        return type(value)(_masked(item, masker) for item in value)
    return value


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
            event = dataclasses.replace(event, step=prefixed)  # type: ignore[call-arg]
        self._sink.emit(event)
