"""A streamed answer read by a task of its own and handed to the turn in batches.

A fast server sends a token per HTTP chunk, and reading a response costs a pass through
the HTTP stack per chunk. Read by the turn itself, every token would also cost a pass
through the engine and the frontend. Read by a task of its own, the chunks that arrived
together are read one after the other without stopping, and their events wait in one
batch: the turn takes them when it wakes, the text joined into one delta, so the engine
and the frontend pay per network read, not per token. A paced server's tokens still go
one by one, at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from awf_nb.engine.ports import ProviderEvent, TextDelta


class BatchedReads:
    """The events of one answer, read by a task of their own and taken by the turn in
    batches (`batches`). Closing the batches early (the turn is cancelled or stops)
    cancels the reading and waits for it to end; an error of the reading is raised to
    the turn. At most `MAX_PENDING` events wait: past that the reading waits for room.
    """

    MAX_PENDING = 4096

    def __init__(self, answer: AsyncGenerator[list[ProviderEvent]]) -> None:
        self._loop = asyncio.get_running_loop()
        self._events: list[ProviderEvent] = []
        self._waiter: asyncio.Future[None] | None = None  # the turn, waiting for events
        self._room: asyncio.Future[None] | None = None  # the reading, waiting for room
        self._error: BaseException | None = None
        self._finished = False
        self._task = self._loop.create_task(self._read(answer))

    async def _read(self, answer: AsyncGenerator[list[ProviderEvent]]) -> None:
        try:
            async with contextlib.aclosing(answer):
                async for events in answer:
                    self._events += events
                    _wake(self._waiter)
                    if len(self._events) >= self.MAX_PENDING:
                        self._room = self._loop.create_future()
                        await self._room
        except BaseException as exc:  # handed to the turn, which raises it
            self._error = exc
        finally:
            self._finished = True
            _wake(self._waiter)

    async def batches(self) -> AsyncIterator[list[ProviderEvent]]:
        try:
            while True:
                if self._events:
                    batch, self._events = self._events, []
                    _wake(self._room)
                    yield _joined(batch)
                elif self._finished:
                    if self._error is not None:
                        raise self._error
                    return
                else:
                    self._waiter = self._loop.create_future()
                    await self._waiter
        finally:
            if not self._task.done():  # the turn stopped early: so does the reading
                self._task.cancel()
                await asyncio.wait([self._task])


def _wake(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


def _joined(events: list[ProviderEvent]) -> list[ProviderEvent]:
    """`events` with the text between two other events joined into one delta."""
    if len(events) == 1:
        return events
    joined: list[ProviderEvent] = []
    texts: list[str] = []
    for event in events:
        if type(event) is TextDelta:
            texts.append(event.text)
            continue
        if texts:
            joined.append(TextDelta("".join(texts)))
            texts = []
        joined.append(event)
    if texts:
        joined.append(TextDelta("".join(texts)))
    return joined
