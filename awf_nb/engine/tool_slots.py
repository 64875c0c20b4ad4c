"""How many tool processes may be alive at once: a bound an eval shares across its runs.

`bounding(ToolProcessBound(n))` makes every tool process started in the current context
(an asyncio task and the tasks it creates) — a Bash or command tool call, a command
partner, an eval's command scorer, each through `tool_process_slot()` — wait for one of
`n` slots, held until the process has ended. An eval shares one bound across all its runs
in one process, so `concurrency` runs × `tools.max_parallel` calls cannot start thousands
of processes at once. Outside a bound (a plain run) nothing waits. Command steps, hooks,
MCP servers and agent CLIs take no slot: a run holds those for long, and a slot held for
a run's life would let a full bound wait on itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections.abc import AsyncIterator, Iterator


def default_tool_processes() -> int:
    """The default bound on an eval's tool processes at once: twice the CPUs (at least 4).

    Tool processes mostly wait (on a build, a test run, the network) or compute: twice the
    CPUs keeps every CPU busy while one waits, without the machine drowning in processes
    (a `concurrency: 1000` eval could otherwise start 8,000)."""
    return max(4, 2 * (os.cpu_count() or 1))


class ToolProcessBound:
    """At most `limit` tool processes alive at once, across every run that shares it."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a tool process bound must be at least 1, got {limit}")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self.running = 0  # processes holding a slot now
        self.waiting = 0  # callers waiting for a slot now
        self.most = 0  # the most that ever held a slot at once

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the block (waiting for one first)."""
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()


_tool_bound: contextvars.ContextVar[ToolProcessBound | None] = contextvars.ContextVar(
    "awf_tool_process_bound", default=None
)


@contextlib.contextmanager
def bounding(bound: ToolProcessBound | None) -> Iterator[None]:
    """Bound the tool processes started in this context (and its tasks) by `bound`."""
    token = _tool_bound.set(bound)
    try:
        yield
    finally:
        _tool_bound.reset(token)


@contextlib.asynccontextmanager
async def tool_process_slot() -> AsyncIterator[None]:
    """A slot of the context's tool process bound for the block; no wait without one."""
    bound = _tool_bound.get()
    if bound is None:
        yield
        return
    async with bound.slot():
        yield
