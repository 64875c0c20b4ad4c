"""An EventSink that records events, for assertions on what a frontend would see."""

from __future__ import annotations

from typing import Any


class Collect:
    """An EventSink that keeps every event, for assertions on what a frontend would see."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def text(self, step: str | None = None) -> str:
        from awf_nb.engine.events import AgentText

        return "".join(e.text for e in self.of(AgentText) if step is None or e.step == step)
