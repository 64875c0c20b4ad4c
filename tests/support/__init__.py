"""Helpers shared by the test suite: real test peers (`openai_server`) and small utilities."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

T = TypeVar("T")


async def collect(events: AsyncIterator[T], limit: int = 100_000, timeout: float = 60.0) -> list[T]:
    """Every item of an async iterator. Bounded in count and time (a hang guard), so a
    runaway or stuck stream fails the test instead of blocking it."""

    async def gather() -> list[T]:
        items: list[T] = []
        async for item in events:
            items.append(item)
            if len(items) > limit:
                raise AssertionError(f"stream produced more than {limit} items")
        return items

    return await asyncio.wait_for(gather(), timeout)


def of_type(items: list[Any], kind: type[T]) -> list[T]:
    """The items that are instances of `kind`, in order."""
    return [item for item in items if isinstance(item, kind)]
