"""The HTTP clients of an event loop, shared by every run on it.

A process may keep hundreds of conversations in flight on one event loop (an evaluation),
or run workflow after workflow on a loop that lives as long as a notebook kernel. Every
run's HTTP provider borrows the loop's `httpx2.AsyncClient` (one for plain http, one for
https, made on first use) instead of making its own, so their connections are pooled
together and no run costs a thread.

Lifetime: a provider takes a lease on its first request (`ClientLease.client`) and gives
it back when the run closes its providers (`ClientLease.aclose`). The clients of a loop
are closed, with their connections, when the last lease on that loop is given back: the
CLI's loop ends with its run, so they are closed before `asyncio.run` closes the loop;
a notebook kernel's runs each close theirs, and the next run makes new ones. Nothing is
left for the garbage collector to find (no "unclosed" warnings, no sockets left open).

Bounds: at most `max_connections()` connections per loop (`AWF_HTTP_MAX_CONNECTIONS`,
default 512) — past that a request waits for a free one, for at most its read timeout —
and idle connections are kept `KEEPALIVE_SECONDS`.

Why httpx2 (httpx's API, on httpcore2) and not httpx 0.28: httpcore 1.0's pool re-examines
every connection, and probes every idle socket, several times per request — O(in flight²)
per request, as all runs share the pool: at 100 conversations in flight, half of an eval's
CPU. httpcore2 assigns requests in one pass, so a conversation costs about the same at 10
or 500 in flight (`benchmarks/eval.py --sweep` measures it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
import weakref

import httpx2

from awf_nb.errors import UserError

DEFAULT_MAX_CONNECTIONS = 512
MAX_CONNECTIONS_VARIABLE = "AWF_HTTP_MAX_CONNECTIONS"
KEEPALIVE_SECONDS = 5.0  # httpx's default; servers close idle connections about as soon


def max_connections() -> int:
    """The most connections one event loop's clients open at once (each of the two)."""
    raw = os.environ.get(MAX_CONNECTIONS_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX_CONNECTIONS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise UserError(
            f"{MAX_CONNECTIONS_VARIABLE} must be a whole number >= 1 (got {raw!r})",
            hint=f"unset it for the default ({DEFAULT_MAX_CONNECTIONS})",
        )
    return value


class _LoopClients:
    """The clients of one event loop and how many leases hold them."""

    def __init__(self) -> None:
        self.leases = 0
        self.clients: dict[bool, httpx2.AsyncClient] = {}  # by "is https"

    def client(self, secure: bool) -> httpx2.AsyncClient:
        client = self.clients.get(secure)
        if client is None:
            limit = max_connections()
            client = self.clients[secure] = httpx2.AsyncClient(
                # Each request sets its own timeouts (the step's); these are the fallback.
                timeout=httpx2.Timeout(300.0, connect=10.0),
                limits=httpx2.Limits(
                    max_connections=limit,
                    max_keepalive_connections=limit,
                    keepalive_expiry=KEEPALIVE_SECONDS,
                ),
                # Plain http never speaks TLS (redirects are not followed), so its client
                # skips the TLS context; https always verifies.
                verify=tls_context() if secure else False,
                follow_redirects=False,
            )
        return client

    async def aclose(self) -> None:
        clients, self.clients = list(self.clients.values()), {}
        for client in clients:
            await client.aclose()


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = (
    weakref.WeakKeyDictionary()
)


class ClientLease:
    """One provider's hold on its event loop's clients (see the module doc)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shared: _LoopClients | None = None

    def client(self, url: str) -> httpx2.AsyncClient:
        """The running loop's client for `url` (taking the lease on first use)."""
        loop = asyncio.get_running_loop()
        shared = self._shared
        if shared is None or self._loop is not loop:
            if shared is not None:  # used on another loop before: that lease is let go
                self._release()
            shared = _loops.get(loop)
            if shared is None:
                shared = _loops[loop] = _LoopClients()
            shared.leases += 1
            self._loop, self._shared = loop, shared
        return shared.client(url[:7].lower() != "http://")

    async def aclose(self) -> None:
        """Give the lease back; the last one on a loop closes its clients. Safe twice."""
        if self._shared is None:
            return
        loop = self._loop
        last = self._release()
        # Clients of another loop cannot be closed from this one (their sockets belong to
        # that loop, which closes its transports when it closes).
        if last is not None and loop is asyncio.get_running_loop():
            await last.aclose()

    def _release(self) -> _LoopClients | None:
        """Let go of the lease; returns the loop's clients when nobody holds them any
        more (they are forgotten at once, so a lease taken meanwhile makes new ones)."""
        shared, loop = self._shared, self._loop
        self._shared = self._loop = None
        assert shared is not None and loop is not None
        shared.leases -= 1
        if shared.leases > 0:
            return None
        if _loops.get(loop) is shared:
            del _loops[loop]
        return shared


def loop_clients(loop: asyncio.AbstractEventLoop) -> list[httpx2.AsyncClient]:
    """The clients `loop` holds open now (for tests and diagnostics)."""
    shared = _loops.get(loop)
    return list(shared.clients.values()) if shared is not None else []


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process. Building one reads the system's CA bundle
    (~20 ms); a notebook kernel running many workflows should pay that once, not per run."""
    return ssl.create_default_context()


with contextlib.suppress(AttributeError):  # a forked child has none of its parent's loops
    os.register_at_fork(after_in_child=_loops.clear)
