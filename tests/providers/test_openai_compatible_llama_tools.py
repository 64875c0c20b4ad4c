"""openai_compatible with tools against a real peer: `python -m llama_cpp.server` running
SmolLM2 (the `llama_server` fixture), through a recording proxy that keeps each request.

What this server supports (llama-cpp-python's server, the GGUF's own chat template, as the
fixture starts it):
- `tools` and `tool_choice` are accepted. A named `tool_choice` forces a call: a grammar
  made from the tool's parameter schema, the arguments streamed in `delta.tool_calls`
  pieces that repeat the call's id and name each time. That is what these tests use, so
  they do not depend on the tiny model's judgement.
- With automatic choice the model answers in text: SmolLM2's template ignores `tools`.
  (`--chat_format chatml-function-calling` can choose automatically, but only without
  streaming, and it leaves tool results out of the prompt — not used here.)
- A tool round is accepted when an assistant message of calls has `content: ""`; it
  refuses `content: null` (HTTP 500), and its templates fail on a missing content.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, ToolCall, ToolSpec, TurnRequest
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from tests.support import collect, of_type
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.real_server

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def options(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "model": "smollm2",
        "max_tokens": 48,
        "max_tokens_field": "max_tokens",  # the server ignores max_completion_tokens
        "temperature": 0,
        "seed": 1,
        **extra,
    }


async def test_a_real_server_gets_the_tools_and_streams_a_forced_call(
    llama_server: str, provider: OpenAICompatibleProvider
) -> None:
    with RecordingProxy(llama_server) as proxy:
        request = TurnRequest(
            prompt="What is the weather in Paris?",
            tools=[WEATHER],
            options=options(proxy.base_url, tool_choice="get_weather"),
        )
        events = await collect(provider.stream(request))

    sent = proxy.requests[-1]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the current weather in a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    [call] = of_type(events, ToolCall)
    assert call.name == "get_weather"  # once, though every piece repeated it
    assert call.id.startswith("call_")
    arguments = json.loads(call.arguments)
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str)
    assert of_type(events, TextDelta) == []
    assert events[-1] == Final("")


async def test_a_real_server_takes_a_tool_round(
    llama_server: str, provider: OpenAICompatibleProvider
) -> None:
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    history = [
        Message("user", "What is the weather in Paris?"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "sunny, 21 degrees", tool_call_id="call_1", name="get_weather"),
    ]
    with RecordingProxy(llama_server) as proxy:
        request = TurnRequest(
            prompt="",
            history=history,
            continues=True,
            tools=[WEATHER],
            options=options(proxy.base_url, max_tokens=16),
        )
        events = await collect(provider.stream(request))

    final = events[-1]
    assert isinstance(final, Final)
    assert final.text.strip()
    assert final.text == "".join(d.text for d in of_type(events, TextDelta))
    messages = proxy.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 degrees"}
