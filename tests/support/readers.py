"""Input readers for tests: a person who never answers."""

from __future__ import annotations

import asyncio


class BlockingReader:
    """Never answers until cancelled: stands in for a person who has not typed yet."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.cancelled = False

    async def read(self, prompt: str) -> str | None:
        self.waiting.set()
        try:
            await asyncio.Future()  # cancelled by the run's cancellation
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return None
