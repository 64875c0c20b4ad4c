"""Waiting in tests without sleeping blindly: poll a condition (sync or async) with a hang
guard, and find a free loopback port for a server a test starts.

The timeouts here are hang guards for a condition that must come true, never a measure of
speed: a slow machine only makes a test slower, not red.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

HANG_GUARD_SECONDS = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (right now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def poll(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Whether `condition` became true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return condition()
        time.sleep(interval)
    return True


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float = HANG_GUARD_SECONDS
) -> None:
    """Block until `condition` holds; fail the test naming `what` if it never does."""
    if not poll(condition, timeout):
        raise AssertionError(f"timed out waiting for {what}")


async def until(
    condition: Callable[[], bool], what: str, timeout: float = HANG_GUARD_SECONDS
) -> None:
    """`wait_until` for async tests: the event loop keeps running while it waits."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
