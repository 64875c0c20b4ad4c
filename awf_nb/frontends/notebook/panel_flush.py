"""Streaming into widgets without flooding the kernel: streamed text is only buffered, and a
flush at most every `interval` seconds sends each changed widget once.

A turn, step or run boundary flushes at once (the panel calls `flush`), so what a person
sees is never more than one interval behind the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from awf_nb.frontends.notebook.panel_items import PanelStats, Streamed


class Flusher:
    """The panel's pending changes and the one timer that sends them."""

    def __init__(
        self,
        interval: float,
        stats: PanelStats,
        loop: Callable[[], asyncio.AbstractEventLoop | None],
    ) -> None:
        self.interval = interval
        self.stats = stats
        self._loop = loop
        self._dirty: dict[Streamed, None] = {}  # insertion-ordered set
        self._handle: asyncio.TimerHandle | None = None
        self._last = float("-inf")

    def mark(self, item: Streamed) -> None:
        """`item` changed: send it at the next flush, which this schedules if needed."""
        self._dirty[item] = None
        if self._handle is not None:
            return
        loop = self._loop()
        if loop is None or loop.is_closed():
            self.flush()
            return
        delay = max(0.0, self._last + self.interval - time.monotonic())
        self._handle = loop.call_later(delay, self.flush)

    def forget(self, item: Streamed) -> None:
        """`item` sends its final value itself: no flush needed for it."""
        self._dirty.pop(item, None)

    def flush(self) -> None:
        """Send every buffered change now (one update per changed widget)."""
        self.cancel()
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        self._last = time.monotonic()
        sent = sum(1 for item in dirty if item.flush())
        if sent:
            self.stats.flushes += 1
            self.stats.updates += sent

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
