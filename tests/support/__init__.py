"""Helpers shared by the test suite: real test peers (`openai_server`) and small utilities."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

T = TypeVar("T")


async def collect(events: AsyncIterator[T], limit: int = 100_000) -> list[T]:
    """Every item of an async iterator (bounded, so a runaway stream fails the test)."""
    items: list[T] = []
    async for item in events:
        items.append(item)
        if len(items) > limit:
            raise AssertionError(f"stream produced more than {limit} items")
    return items


def of_type(items: list[Any], kind: type[T]) -> list[T]:
    """The items that are instances of `kind`, in order."""
    return [item for item in items if isinstance(item, kind)]
