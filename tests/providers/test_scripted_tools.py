"""The scripted provider scripting tool calls (chat mode), and what it keeps of requests."""

from __future__ import annotations

from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, ToolCall, ToolSpec, TurnRequest, Usage
from awf_nb.errors import ProviderError
from awf_nb.providers.scripted import ScriptedProvider
from tests.support import collect, of_type


def turn(*replies: Any, **fields: Any) -> TurnRequest:
    return TurnRequest(
        prompt=fields.pop("prompt", "hi"), step="chat", options={"replies": list(replies)}, **fields
    )


async def test_a_reply_can_call_tools() -> None:
    reply = {
        "text": "Let me check.",
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_time"},
            {"name": "raw", "arguments": '{"not json', "id": "mine"},
        ],
    }
    events = await collect(ScriptedProvider().stream(turn(reply)))
    kinds = [type(e).__name__ for e in events]
    assert kinds[-5:] == ["ToolCall", "ToolCall", "ToolCall", "Usage", "Final"]
    assert "".join(e.text for e in of_type(events, TextDelta)) == "Let me check."
    assert of_type(events, ToolCall) == [
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_2", "get_time", "{}"),
        ToolCall("mine", "raw", '{"not json'),
    ]
    assert events[-1] == Final("Let me check.")
    assert of_type(events, Usage)[0].output_tokens > 0


async def test_a_reply_of_only_calls_ends_with_empty_text() -> None:
    events = await collect(ScriptedProvider().stream(turn({"tool_calls": [{"name": "t"}]})))
    assert of_type(events, TextDelta) == []
    assert events[-1] == Final("")


async def test_each_tool_round_takes_the_next_reply() -> None:
    provider = ScriptedProvider()
    replies = [{"tool_calls": [{"name": "get_time"}]}, "It is noon."]
    first = await collect(provider.stream(turn(*replies)))
    assert of_type(first, ToolCall) == [ToolCall("call_1", "get_time", "{}")]
    history = [
        Message("user", "hi"),
        Message("assistant", "", tool_calls=(ToolCall("call_1", "get_time"),)),
        Message("tool", "12:00", tool_call_id="call_1", name="get_time"),
    ]
    second = await collect(
        provider.stream(turn(*replies, prompt="", history=history, continues=True))
    )
    assert second[-1] == Final("It is noon.")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"tool_calls": []}, "tool_calls must be a non-empty list of {name, arguments, id}"),
        ({"tool_calls": [{"arguments": {}}]}, "tool_calls[0].name is required"),
        (
            {"tool_calls": [{"name": "t", "arguments": 3}]},
            "tool_calls[0].arguments must be an object or its JSON text (got 3)",
        ),
        (
            {"tool_calls": [{"name": "t"}], "surprise": 1},
            "surprise is not a known field of {tool_calls, text}",
        ),
    ],
)
async def test_malformed_tool_call_replies_are_clear_option_errors(
    bad: dict[str, Any], message: str
) -> None:
    """Only the tool-call form is described (not the {error} form a mapping could be)."""
    with pytest.raises(ProviderError) as caught:
        await collect(ScriptedProvider().stream(turn(bad)))
    assert caught.value.message.startswith(f"scripted: options.replies[0].{message}")
    assert "error" not in caught.value.message.removeprefix("scripted: ")


async def test_echo_in_a_tool_round_answers_with_the_results() -> None:
    history = [
        Message("user", "hi"),
        Message("assistant", "", tool_calls=(ToolCall("a", "x"), ToolCall("b", "y"))),
        Message("tool", "first", tool_call_id="a", name="x"),
        Message("tool", "second", tool_call_id="b", name="y"),
    ]
    request = TurnRequest(prompt="", history=history, continues=True)
    events = await collect(ScriptedProvider().stream(request))
    assert events[-1] == Final("first\nsecond")


async def test_requests_are_kept_for_tests() -> None:
    provider = ScriptedProvider()
    tools = [ToolSpec("get_time", "the time")]
    request = TurnRequest(prompt="hi", tools=tools)
    await collect(provider.stream(request))
    assert provider.received == [request]
    assert provider.received[0].tools == tools
