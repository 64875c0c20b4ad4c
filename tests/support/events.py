"""Test doubles for the engine's seams: an EventSink that records events, and a provider
factory with extra test providers."""

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


def with_providers(**extra: type) -> Any:
    """A per-run provider factory that also knows `extra` test providers, by name,
    without registering them globally (other tests must not see them)."""
    from awf_nb.providers import provider_factory

    base = provider_factory()
    made: dict[str, Any] = {}

    def factory(name: str) -> Any:
        if name in extra:
            return made.setdefault(name, extra[name](name))
        return base(name)

    return factory
