"""The `local` provider's tools against the real SmolLM2-135M model (marker `real_model`),
generated in the test's process by the model process's own code (to see the prompts).

The tiny model rarely decides to call a tool by itself (benchmarks/local_tools.py measures
it), so these tests check the request path — the tools reach the chat template, a call the
model writes is parsed — by forcing a call with `tool_choice`, which llama.cpp's grammar
enforces whatever the model would have preferred.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, ToolCall, ToolSpec, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers import local_model
from awf_nb.providers.local import LocalProvider
from tests.support import collect, of_type
from tests.support.local_turns import in_process

pytestmark = pytest.mark.real_model

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSpec(
    "get_time",
    "Get the time in a time zone",
    {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
)


@pytest.fixture
def prompts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompt texts the model is given (its chat template's output)."""
    seen: list[str] = []
    render = local_model.LoadedModel.render

    def spy(self: local_model.LoadedModel, *args: Any, **kwargs: Any) -> Any:
        rendered = render(self, *args, **kwargs)
        seen.append(rendered.prompt)
        return rendered

    monkeypatch.setattr(local_model.LoadedModel, "render", spy)
    return seen


def turn(prompt: str, tools: list[ToolSpec], **options: Any) -> TurnRequest:
    return TurnRequest(prompt=prompt, tools=tools, options={"max_tokens": 48, **options})


async def test_a_forced_call_is_a_well_formed_call_to_that_tool(prompts: list[str]) -> None:
    events = await collect(
        in_process(
            turn("What is the weather in Paris?", [CLOCK, WEATHER], tool_choice="get_weather")
        )
    )
    [call] = of_type(events, ToolCall)
    assert call.id == "call_1"
    assert call.name == "get_weather"
    arguments = json.loads(call.arguments)
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str)
    assert of_type(events, TextDelta) == []
    assert events[-1] == Final("")
    # The tools reached the model's prompt (SmolLM2's template has no tools: the system
    # prompt describes them), and the reply was started inside a call.
    assert json.dumps(WEATHER.parameters) in prompts[-1]
    assert json.dumps(CLOCK.parameters) in prompts[-1]


async def test_required_calls_one_of_the_tools() -> None:
    events = await collect(
        in_process(turn("What time is it in Tokyo?", [WEATHER, CLOCK], tool_choice="required"))
    )
    [call] = of_type(events, ToolCall)
    assert call.name in {"get_weather", "get_time"}
    expected = {"get_weather": {"city"}, "get_time": {"zone"}}[call.name]
    assert set(json.loads(call.arguments)) == expected


async def test_a_tool_round_gives_the_model_the_results(prompts: list[str]) -> None:
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    history = [
        Message("user", "What is the weather in Paris?"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "sunny and 21 degrees", tool_call_id="call_1", name="get_weather"),
    ]
    request = TurnRequest(
        prompt="",
        history=history,
        continues=True,
        tools=[WEATHER],
        options={"max_tokens": 24, "tool_choice": "auto"},
    )
    events = await collect(in_process(request))
    assert isinstance(events[-1], Final)
    assert "sunny and 21 degrees" in prompts[-1]
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in prompts[-1]
    assert prompts[-1].endswith("<|im_start|>assistant\n")  # no new user message


async def test_an_automatic_turn_streams_what_it_does_not_call() -> None:
    """Whatever the model decides, the streamed text is the reply's text."""
    request = turn("Weather in Oslo?", [WEATHER], tool_choice="auto")
    events = await collect(in_process(request))
    final = events[-1]
    assert isinstance(final, Final)
    assert final.text == "".join(e.text for e in of_type(events, TextDelta))
    assert "<tool_call>" not in final.text or not of_type(events, ToolCall)


async def test_tools_on_the_bundled_model_stop_at_once_with_the_way_out() -> None:
    """Left to decide, the bundled model never calls a tool (benchmarks/local_tools.py): a
    step that gives it tools would run with tools nobody uses. Unless the step chose a
    `tool_choice`, the turn fails before anything is loaded, naming the switch to a model
    that can."""
    with pytest.raises(ProviderError) as caught:
        await collect(LocalProvider().stream(turn("Weather in Oslo?", [WEATHER])))
    message = str(caught.value)
    assert message.startswith("local: this step gives the model tools")
    assert "needs a larger model" in message and "--model" in message
    assert caught.value.exit_code == 1
