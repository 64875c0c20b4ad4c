"""Test doubles for the engine's seams: an EventSink that records events, a provider
factory with extra test providers, and one that records every request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from awf_nb.engine.ports import ProviderEvent, TurnRequest


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


class Recording:
    """A provider factory whose scripted provider remembers every request."""

    def __init__(self) -> None:
        self.requests: list[TurnRequest] = []
        from awf_nb.providers import provider_factory

        self._inner = provider_factory()

    def __call__(self, name: str) -> Any:
        provider = self._inner(name)
        outer = self

        class Recorded:
            session_kind = provider.session_kind

            def __init__(self) -> None:
                self.name = provider.name

            def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]:
                outer.requests.append(turn)
                return provider.stream(turn)

            async def aclose(self) -> None:
                await provider.aclose()

        return Recorded()
