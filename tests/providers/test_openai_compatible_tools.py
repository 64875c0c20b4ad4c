"""openai_compatible with tools (chat mode), against the real-HTTP test server: what the
requests carry (OpenAI function format, tool calls and results in the history) and how
streamed `tool_calls` pieces become complete `ToolCall` events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from awf_nb.engine.ports import (
    Final,
    Message,
    TextDelta,
    ToolCall,
    ToolSpec,
    TurnRequest,
    Usage,
)
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from tests.support import collect, of_type
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.usefixtures("no_openai_environment")

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSpec("get_time", "The time now")


def turn_for(server: OpenAIServer, prompt: str = "Hi", **fields: Any) -> TurnRequest:
    options = {"base_url": server.base_url, "model": "test-model", **fields.pop("options", {})}
    return TurnRequest(prompt=prompt, options=options, **fields)


# --- the request -------------------------------------------------------------------------------


async def test_a_request_without_tools_is_what_it_always_was(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    history = [Message("user", "a"), Message("assistant", "b")]
    request = turn_for(openai_server, system_prompt="sys", history=history)
    request.options["tool_choice"] = "required"  # ignored: there are no tools to choose
    await collect(provider.stream(request))
    assert openai_server.requests[-1].body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "Hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_tools_are_sent_in_function_format(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    await collect(provider.stream(turn_for(openai_server, tools=[WEATHER, CLOCK])))
    body = openai_server.requests[-1].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": WEATHER.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "The time now",
                "parameters": {"type": "object"},
            },
        },
    ]
    assert "tool_choice" not in body  # the server's default (auto) unless asked


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice_is_sent_with_the_tools(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider, choice: str, sent: Any
) -> None:
    request = turn_for(openai_server, tools=[WEATHER], options={"tool_choice": choice})
    await collect(provider.stream(request))
    assert openai_server.requests[-1].body["tool_choice"] == sent


async def test_a_tool_round_sends_calls_and_results_and_no_new_user_message(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    calls = (
        ToolCall("call_a", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_b", "get_time", "{}"),
    )
    history = [
        Message("user", "Weather and time?"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "sunny", tool_call_id="call_a", name="get_weather"),
        Message("tool", "noon", tool_call_id="call_b", name="get_time"),
    ]
    request = turn_for(
        openai_server, prompt="", history=history, tools=[WEATHER, CLOCK], continues=True
    )
    await collect(provider.stream(request))
    assert openai_server.requests[-1].body["messages"] == [
        {"role": "user", "content": "Weather and time?"},
        {
            "role": "assistant",
            "content": "",  # llama_cpp.server refuses null here
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "noon"},
    ]


async def test_an_assistant_message_with_text_and_calls_keeps_its_text(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    history = [
        Message("user", "q"),
        Message("assistant", "Let me check.", tool_calls=(ToolCall("c1", "get_time"),)),
        Message("tool", "noon", tool_call_id="c1", name="get_time"),
    ]
    request = turn_for(openai_server, prompt="", history=history, continues=True)
    await collect(provider.stream(request))
    assistant = openai_server.requests[-1].body["messages"][1]
    assert assistant["content"] == "Let me check."
    assert assistant["tool_calls"][0]["id"] == "c1"


# --- the reply ---------------------------------------------------------------------------------


async def test_parallel_calls_streamed_in_interleaved_pieces_are_assembled(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    weather = {"name": "get_weather", "arguments": '{"city": "Paris, France"}'}
    clock = {"name": "get_time", "arguments": '{"zone": "Europe/Paris"}', "id": "call_xyz"}
    reply = Reply.calls(weather, clock, pieces=4, text="Checking both.")
    assert any(len(chunk) == 2 for chunk in reply.tool_call_chunks)  # the test is a hard one
    openai_server.script(reply)

    events = await collect(provider.stream(turn_for(openai_server, tools=[WEATHER, CLOCK])))

    assert of_type(events, ToolCall) == [
        ToolCall("call_0", "get_weather", '{"city": "Paris, France"}'),
        ToolCall("call_xyz", "get_time", '{"zone": "Europe/Paris"}'),
    ]
    kinds = [type(e).__name__ for e in events]
    # Text first, then the complete calls once the stream ended, then usage, then Final.
    assert kinds[-4:] == ["ToolCall", "ToolCall", "Usage", "Final"]
    assert set(kinds[:-4]) == {"TextDelta"}
    assert events[-1] == Final("Checking both.")


async def test_a_reply_of_only_calls_has_empty_final_text(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    openai_server.script(Reply.calls({"name": "get_time", "arguments": "{}"}))
    events = await collect(provider.stream(turn_for(openai_server, tools=[CLOCK])))
    assert of_type(events, TextDelta) == []
    assert of_type(events, ToolCall) == [ToolCall("call_0", "get_time", "{}")]
    assert events[-1] == Final("")


async def test_calls_arrive_in_index_order_whatever_order_they_start_in(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    def piece(index: int, name: str, arguments: str) -> dict[str, Any]:
        return {
            "index": index,
            "id": f"id{index}",
            "function": {"name": name, "arguments": arguments},
        }

    chunks = [[piece(1, "second", "{}")], [piece(0, "first", '{"a"')], [piece(0, "", ": 1}")]]
    openai_server.script(Reply(tokens=[], tool_call_chunks=chunks))
    events = await collect(provider.stream(turn_for(openai_server, tools=[CLOCK])))
    assert of_type(events, ToolCall) == [
        ToolCall("id0", "first", '{"a": 1}'),
        ToolCall("id1", "second", "{}"),
    ]


async def test_calls_without_ids_or_arguments_are_completed(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    chunks = [
        [{"index": 0, "function": {"name": "get_time"}}],
        [{"index": 1, "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}],
    ]
    openai_server.script(Reply(tokens=[], tool_call_chunks=chunks))
    events = await collect(provider.stream(turn_for(openai_server, tools=[CLOCK, WEATHER])))
    assert of_type(events, ToolCall) == [
        ToolCall("call_1", "get_time", "{}"),
        ToolCall("call_2", "get_weather", '{"city": "Oslo"}'),
    ]


async def test_a_name_and_id_repeated_in_every_piece_are_taken_once(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    """llama_cpp.server streams a forced call with the id and name in every piece."""
    head = {"index": 0, "id": "call__0_get_weather_cmpl-1", "type": "function"}
    chunks = [
        [{**head, "function": {"name": "get_weather", "arguments": part}}]
        for part in ['{"ci', 'ty": "Ro', 'me"}']
    ]
    openai_server.script(Reply(tokens=[], tool_call_chunks=chunks))
    events = await collect(provider.stream(turn_for(openai_server, tools=[WEATHER])))
    assert of_type(events, ToolCall) == [
        ToolCall("call__0_get_weather_cmpl-1", "get_weather", '{"city": "Rome"}')
    ]


async def test_a_whole_json_completion_with_calls(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    calls = [{"name": "get_weather", "arguments": '{"city": "Lima"}'}]
    openai_server.script(Reply(tokens=[], tool_calls=calls, as_json=True))
    events = await collect(provider.stream(turn_for(openai_server, tools=[WEATHER])))
    assert of_type(events, ToolCall) == [ToolCall("call_0", "get_weather", '{"city": "Lima"}')]
    assert events[-1] == Final("")


async def test_estimated_usage_counts_the_calls(
    openai_server: OpenAIServer, provider: OpenAICompatibleProvider
) -> None:
    arguments = json.dumps({"city": "x" * 400})
    openai_server.script(Reply.calls({"name": "get_weather", "arguments": arguments}, usage=False))
    events = await collect(provider.stream(turn_for(openai_server, tools=[WEATHER])))
    (usage,) = of_type(events, Usage)
    assert usage.estimated
    assert usage.output_tokens >= 100
