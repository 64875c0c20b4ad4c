"""What travels between awf and its model process, as JSON: turns, their events, errors.

The `local` provider (local.py) and the model process (local_worker.py) speak JSON lines
over a pipe. This module turns the engine's own types into plain JSON and back, so both
sides agree on one encoding and nothing but these known types is ever rebuilt from a line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from awf_nb.engine.ports import (
    Final,
    Message,
    ModelLoad,
    Notice,
    ProviderEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

# The events a turn of the model process can emit, by their wire name.
EVENT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls for cls in (TextDelta, ToolCall, Usage, Notice, ModelLoad, Final)
}


def encode_event(event: ProviderEvent) -> dict[str, Any]:
    """`{"event": "TextDelta", "data": {"text": …}}` for one of `EVENT_TYPES`."""
    return {"event": type(event).__name__, "data": dataclasses.asdict(event)}


def decode_event(line: dict[str, Any]) -> ProviderEvent:
    """The event a line holds; `ValueError` for anything but `EVENT_TYPES` with their fields."""
    cls = EVENT_TYPES.get(line.get("event", ""))
    data = line.get("data")
    if cls is None or not isinstance(data, dict):
        raise ValueError(f"not an event of the model process: {str(line)[:200]}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise ValueError(f"a malformed {cls.__name__} from the model process: {exc}") from None


def encode_messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(message) for message in messages]


def decode_messages(items: list[dict[str, Any]]) -> list[Message]:
    return [
        Message(
            role=item["role"],
            content=item["content"],
            tool_calls=tuple(ToolCall(**call) for call in item.get("tool_calls", ())),
            tool_call_id=item.get("tool_call_id", ""),
            name=item.get("name", ""),
        )
        for item in items
    ]


def encode_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(tool) for tool in tools]


def decode_tools(items: list[dict[str, Any]]) -> list[ToolSpec]:
    return [ToolSpec(**item) for item in items]
