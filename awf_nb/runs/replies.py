"""A scripted `InputReader`: replies from a list, then end of input.

What `RunOptions(replies=[…])` answers a run with: `awf run --reply TEXT`, `%%awf --reply`,
`awf_nb.run(…, replies=[…])`, an evaluation case's scripted replies, and tests. It also
answers tool-call confirmations (`confirm`), from the same list, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

# Replies that allow a tool call; any other reply refuses it.
ALLOW = frozenset({"y", "yes", "allow"})


class ScriptedReader:
    """Serves `replies` in order, then None (end of input), like a closed pipe.

    A tool call to confirm takes the next reply too: `y`, `yes` or `allow` (any case)
    allows it, any other reply refuses it, and none left is no answer (refused)."""

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

    async def confirm(self, question: str) -> bool | None:
        reply = await self.read(question)
        return None if reply is None else reply.strip().lower() in ALLOW
