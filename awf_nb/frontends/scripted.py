"""A scripted `InputReader`: replies from a list, then end of input.

Used by tests, by `awf run --reply TEXT`, and by headless notebook runs (`--reply`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class ScriptedReader:
    """Serves `replies` in order, then None (end of input), like a closed pipe."""

    def __init__(self, replies: Iterable[str] = (), *, delay: float = 0.0) -> None:
        self._replies = list(replies)
        self._delay = delay
        self.prompts: list[str] = []  # what the run asked, for tests

    @property
    def remaining(self) -> int:
        return len(self._replies)

    async def read(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        if self._delay:
            await asyncio.sleep(self._delay)
        else:
            await asyncio.sleep(0)  # a real suspension point, so cancellation can land here
        return self._replies.pop(0) if self._replies else None
