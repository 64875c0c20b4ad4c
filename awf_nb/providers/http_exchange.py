"""One streamed HTTP exchange run by a worker thread and read by the event loop.

httpx's synchronous client costs far less per request and per network read than its
asyncio stack, so a provider runs each turn's request in a worker thread (design.md:
blocking work in worker threads, results handed back with `loop.call_soon_threadsafe`).
`Exchange` is what the two sides share: the worker posts each read's events, the loop
takes them in batches, and closing it from the loop shuts the connection down at once (a
read blocked in the worker returns, and the server stops generating). `WORKERS` keeps the
threads for the next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from awf_nb.engine.ports import ProviderEvent, TextDelta

# After `[DONE]` what follows is drained this long at most (a server keeping the stream
# open then only costs its connection).
DRAIN_SECONDS = 0.5
# After handing over some of an answer, the loop lets the next pieces gather this long
# before it takes them (the last ones it takes at once): a server pacing its tokens then
# costs a wake-up per few milliseconds, not per token, well within what a reader notices.
GATHER_SECONDS = 0.005
MAX_PENDING = 4096  # events a worker hands over before it waits for the loop to take them


class Exchange:
    """One turn's HTTP exchange, between the worker thread that runs it and the event loop
    that reads its events.

    The worker adds each network read's events to a pending list (`post`) and wakes the
    loop only when no wake-up is on its way already: while the loop works through what it
    took, the next reads pile up and arrive as one batch (a fast server sends a token per
    read; a wake-up per token would cost more than the token). After a batch the loop lets
    the next pieces gather for `GATHER_SECONDS` (a paced server's tokens then come a few
    at a time); the end of the answer is handed over at once. Past `MAX_PENDING` events
    the worker waits for the loop (a slow reader slows the reading). The loop takes the
    pending events (`next_batch`) until the answer is complete (`[DONE]`) or the exchange
    ended with an error; it closes the exchange when it stops reading early (`close`):
    the connection is shut down at once, even while the worker waits in a read.

    After `[DONE]` the worker drains the response and gives the connection back to the
    pool before it hands over the last events, then frees itself (`released`); a next
    turn that comes sooner waits for that (`wait_released`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        # Made when the worker first waits for room (rarely: most answers never fill it).
        self._room: threading.Condition | None = None
        self._pending: list[ProviderEvent] = []
        self._texts: list[str] = []  # text after the last pending event, not joined yet
        self._count = 0  # events and text pieces pending
        self._wake_sent = False  # a wake-up is on its way to the loop
        self._waiter: asyncio.Future[None] | None = None
        self._socket: socket.socket | None = None
        self._closed = False  # the loop stopped reading
        self.complete = False  # `[DONE]` arrived: what is pending is all there is
        self._ended = False  # the worker is done (`_outcome`: the exception, if any)
        self._outcome: BaseException | None = None
        self.released = False  # the worker let go of the connection and is free again
        self._release_waiters: list[asyncio.Future[None]] = []
        self._draining_since: float | None = None  # monotonic time `[DONE]` was read
        self._watch: asyncio.TimerHandle | None = None
        self._gather_until: float | None = None  # loop time until which pieces gather

    # -- the worker's side --

    def run(self, job: Callable[[], None]) -> None:
        """Run the exchange, keeping how it ended (None, or the exception) for `end`."""
        try:
            job()
        except BaseException as exc:  # all of it goes to the loop, which raises it
            self._outcome = exc
        finally:
            self.detach()  # the connection may serve another exchange now

    def end(self) -> None:
        """The worker is free again: tell whoever waits (the loop reading an answer that
        never completed, a turn or `aclose` waiting for the connection)."""
        with self._lock:
            self._ended = self.released = True
            wake = not self.complete  # an error, or the end of a JSON answer: at once
            self._wake_sent = True
            waiters, self._release_waiters = self._release_waiters, []
        if wake:
            self._send(self._woken)
        for waiter in waiters:
            self._send(_resolve, waiter)

    def post(self, events: list[ProviderEvent], *, complete: bool = False) -> None:
        """Hand over one read's events (`complete`: the last ones of the answer)."""
        with self._lock:
            while self._count > MAX_PENDING and not self._closed and not complete:
                if self._loop.is_closed():  # nobody will ever take them
                    self._closed = True
                    break
                if self._room is None:
                    self._room = threading.Condition(self._lock)
                self._room.wait(1.0)
            if self._closed:
                return
            texts = self._texts
            for event in events:
                if type(event) is TextDelta:
                    texts.append(event.text)
                else:
                    if texts:
                        self._pending.append(TextDelta("".join(texts)))
                        texts.clear()
                    self._pending.append(event)
            self._count += len(events)
            self.complete = complete
            wake = self._wake() or complete  # the end of the answer goes over at once
        if wake:
            self._send(self._woken)

    def draining(self) -> None:
        """`[DONE]` came: what follows is drained before the answer goes to the loop, for
        at most `DRAIN_SECONDS` (the loop, waiting for the answer, watches the time)."""
        self._draining_since = time.monotonic()

    def _wake(self) -> bool:
        """Whether to send a wake-up now (under the lock): not when one is on its way."""
        if self._wake_sent:
            return False
        self._wake_sent = True
        return True

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: a new connection's socket is known before any reply."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            if stream is not None:
                self.attach(stream)

    def attach(self, stream: Any) -> None:
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._socket = sock
            if self._closed:
                _shutdown(sock)

    def detach(self) -> None:
        with self._lock:
            self._socket = None

    def _send(self, callback: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is reading
            self._loop.call_soon_threadsafe(callback, *args)

    # -- the loop's side --

    async def next_batch(self) -> list[ProviderEvent] | None:
        """The events that arrived since the last call (text joined into one delta between
        other events); None once the answer is complete; raises what stopped the
        exchange early."""
        loop = self._loop
        while True:
            with self._lock:
                complete, ended, outcome = self.complete, self._ended, self._outcome
                gather = 0.0
                if self._gather_until is not None and not (complete or ended):
                    gather = self._gather_until - loop.time()
                if gather <= 0:
                    self._gather_until = None
                    batch = self._pending
                    if self._texts:
                        batch.append(TextDelta("".join(self._texts)))
                        self._texts.clear()
                    if batch:
                        self._pending, self._count = [], 0
                        if self._room is not None:
                            self._room.notify()
                        if not complete:  # more to come: let it gather (no wake-ups)
                            self._wake_sent = True
                            self._gather_until = loop.time() + GATHER_SECONDS
                        return batch
                    self._wake_sent = False  # the worker's next events wake the loop
            if gather > 0:  # until the time is up, or the answer is complete
                self._waiter = loop.create_future()
                timer = loop.call_later(gather, self._woken)
                try:
                    await self._waiter
                finally:
                    self._waiter = None
                    timer.cancel()
                continue
            if complete:
                return None
            if ended:
                if outcome is not None:
                    raise outcome
                return None
            self._waiter = loop.create_future()
            self._watch = loop.call_later(DRAIN_SECONDS, self._watch_drain)
            try:
                await self._waiter
            finally:
                self._waiter = None
                self._watch.cancel()

    def _watch_drain(self) -> None:
        """While the loop waits: a drain past `DRAIN_SECONDS` (a server keeping the
        stream open after `[DONE]`) ends with the connection shut down."""
        since = self._draining_since
        left = DRAIN_SECONDS if since is None else since + DRAIN_SECONDS - time.monotonic()
        if left <= 0:
            self._abort()
        elif self._waiter is not None:
            self._watch = self._loop.call_later(left, self._watch_drain)

    def _woken(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait_released(self) -> None:
        """Until the worker let go of the connection (after `[DONE]`: at most the drain)."""
        with self._lock:
            if self.released:
                return
            waiter = self._loop.create_future()
            self._release_waiters.append(waiter)
        await waiter

    def close(self) -> None:
        """The loop stopped reading: shut the connection down if it is still in use."""
        with self._lock:
            self._closed = True
            if self._room is not None:
                self._room.notify()  # a worker waiting for room sees `_closed`
            _shutdown(self._socket)

    def _abort(self) -> None:
        with self._lock:
            _shutdown(self._socket)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _shutdown(sock: socket.socket | None) -> None:
    """End the connection both ways: a read blocked on it in another thread returns. (The
    plain socket's method: on a TLS socket it must not touch the TLS state in use.)"""
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


_Inbox = queue.SimpleQueue[tuple[Callable[[], None], Callable[[], None]]]


class Workers:
    """Daemon threads that run HTTP exchanges, kept for the next turn (starting a thread per
    request would cost more than the request). Shared by every provider in the process;
    a turn waiting on a slow server holds one thread, others get their own."""

    _KEEP = 8  # idle threads kept; more are let go

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Inbox] = []
        if hasattr(os, "register_at_fork"):  # a forked child has none of these threads
            os.register_at_fork(after_in_child=self._idle.clear)

    def submit(self, job: Callable[[], None], then: Callable[[], None]) -> None:
        """Run `job` in a worker, then `then` once that worker is free again (so the next
        turn, started by `then`, finds it idle)."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            worker = threading.Thread(
                target=self._serve, args=(inbox,), name="awf-http", daemon=True
            )
            worker.start()
        inbox.put((job, then))

    def _serve(self, inbox: _Inbox) -> None:
        while True:
            job, then = inbox.get()
            # A job reports its own errors (`Exchange.run`); whatever escapes must not end
            # a thread that is (or is about to be) listed as idle.
            with contextlib.suppress(Exception):
                job()
            with self._lock:
                keep = len(self._idle) < self._KEEP
                if keep:
                    self._idle.append(inbox)
            with contextlib.suppress(Exception):
                then()
            if not keep:
                return


WORKERS = Workers()
