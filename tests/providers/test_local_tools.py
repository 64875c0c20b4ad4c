"""Tools for the `local` provider without running a model: the prompt a chat template is
given, how `<tool_call>` blocks are read out of a streamed reply, and the provider's events
with a scripted stand-in for llama.cpp (the real model: test_local_tools_real.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, ToolCall, ToolSpec, TurnRequest
from awf_nb.errors import ProviderError
from awf_nb.providers import local_model
from awf_nb.providers.local_tools import (
    CallScanner,
    call_schema,
    parse_calls,
    template_knows_tools,
    template_messages,
)
from tests.support import collect, of_type
from tests.support.local_turns import in_process
from tests.support.peers import require_module

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
ROUND = [
    Message("user", "Weather in Paris and Rome?"),
    Message("assistant", "", tool_calls=(CALL, ToolCall("call_2", "get_weather", '{"city": "Rome"}'))),
    Message("tool", "sunny", tool_call_id="call_1", name="get_weather"),
    Message("tool", "rainy", tool_call_id="call_2", name="get_weather"),
]  # fmt: skip
# SmolLM2-135M-Instruct's chat template (it knows nothing of tools).
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A small template that renders tools itself, the way Qwen 2.5's does.
TOOLS_TEMPLATE = (
    "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>\n"
    "{% endif %}{% for m in messages %}[{{ m.role }}]"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}call {{ c.function.name }} "
    "{{ c.function.arguments | tojson }};{% endfor %}"
    "{% elif m.role == 'tool' %}{{ m.tool_call_id }}={{ m.content }}"
    "{% else %}{{ m.content }}{% endif %}\n{% endfor %}[assistant]"
)


# --- the prompt ------------------------------------------------------------------------------


def test_which_templates_know_tools() -> None:
    assert not template_knows_tools(SMOLLM2_TEMPLATE)
    assert template_knows_tools(TOOLS_TEMPLATE)


def test_a_template_without_tools_gets_them_in_the_system_prompt() -> None:
    messages = template_messages([Message("system", "Be brief."), *ROUND], [WEATHER], native=False)
    system = messages[0]["content"]
    assert system.startswith("Be brief.\n\nYou are a function calling AI model.")
    assert json.dumps(WEATHER.parameters) in system
    assert messages[2] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call>\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>',
    }
    # Both results in one user message: roles keep alternating.
    assert messages[3] == {
        "role": "user",
        "content": '<tool_response>\n{"name": "get_weather", "content": "sunny"}\n'
        "</tool_response>\n"
        '<tool_response>\n{"name": "get_weather", "content": "rainy"}\n</tool_response>',
    }
    assert len(messages) == 4


def test_without_a_system_prompt_one_is_made_for_the_tools() -> None:
    messages = template_messages([Message("user", "hi")], [WEATHER], native=False)
    assert [m["role"] for m in messages] == ["system", "user"]


def test_a_template_with_tools_gets_calls_and_results_as_messages() -> None:
    messages = template_messages(ROUND, [WEATHER], native=True)
    assert messages[1]["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
    }
    assert messages[2] == {
        "role": "tool",
        "content": "sunny",
        "tool_call_id": "call_1",
        "name": "get_weather",
    }


def test_the_forced_call_schema_names_each_tool() -> None:
    schema = call_schema([WEATHER])
    [branch] = schema["anyOf"]
    assert branch["properties"] == {
        "name": {"const": "get_weather"},
        "arguments": WEATHER.parameters,
    }


# --- reading calls back ----------------------------------------------------------------------


def scan(pieces: list[str]) -> tuple[list[str], str, list[ToolCall]]:
    scanner = CallScanner()
    shown = [text for piece in pieces if (text := scanner.feed(piece))]
    rest, calls = scanner.finish()
    return shown, rest, calls


def test_text_before_a_call_streams_and_the_call_is_parsed() -> None:
    pieces = ["Sure", ", let me check. <", "tool_", 'call>\n{"name": "get_weather", ',
              '"arguments": {"city": "Paris"}}\n</tool', "_call>"]  # fmt: skip
    shown, rest, calls = scan(pieces)
    assert "".join(shown) == "Sure, let me check. "
    assert rest == ""
    assert calls == [CALL]


def test_a_held_back_angle_bracket_is_released_when_it_is_not_a_call() -> None:
    shown, rest, calls = scan(["1 <", " 2 and x <tool"])
    assert "".join(shown) + rest == "1 < 2 and x <tool"
    assert calls == []


def test_lists_parameters_and_several_blocks() -> None:
    text = (
        '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"x": 1}}]'
        '</tool_call>\n<tool_call>{"name": "c", "arguments": "{\\"y\\": 2}"}</tool_call>'
    )
    assert parse_calls(text) == (
        "",
        [ToolCall("call_1", "a", "{}"), ToolCall("call_2", "b", '{"x": 1}'),
         ToolCall("call_3", "c", '{"y": 2}')],
    )  # fmt: skip


def test_an_unclosed_last_block_still_counts() -> None:
    assert parse_calls('<tool_call>\n{"name": "a", "arguments": {}}\n')[1] == [
        ToolCall("call_1", "a", "{}")
    ]


def test_a_block_that_is_not_a_call_stays_text() -> None:
    text = "<tool_call>\nnot json\n</tool_call>"
    assert parse_calls(text) == (text, [])


# --- the provider, with a scripted stand-in for llama.cpp ------------------------------------
# These need llama-cpp-python (its chat template formatter); the tests above do not.


class FakeLlama:
    """Tokenizes one token per 4 characters and streams a scripted completion."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.prompts: list[list[int]] = []
        self.grammars: list[Any] = []

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(max(1, len(text) // 4)))

    def create_completion(
        self, *, prompt: list[int], grammar: Any = None, **_: Any
    ) -> Iterator[Any]:
        self.prompts.append(prompt)
        self.grammars.append(grammar)
        for index, piece in enumerate(self.pieces):
            last = index == len(self.pieces) - 1
            yield {"choices": [{"text": piece, "finish_reason": "stop" if last else None}]}


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> Any:
    require_module("llama_cpp", "pip install 'awf-nb[local]'")
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def install(pieces: list[str], template: str = SMOLLM2_TEMPLATE) -> local_model.LoadedModel:
        formatter = Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="")
        model = local_model.LoadedModel(
            llama=FakeLlama(pieces),  # type: ignore[arg-type]
            formatter=formatter,
            path=Path("fake.gguf"),
            n_ctx=2048,
            threads=1,
            load_seconds=0.0,
        )
        model.grammar = lambda schema: ("grammar", schema)  # type: ignore[method-assign,assignment]

        @contextmanager
        def locked(*_: Any) -> Iterator[local_model.LoadedModel]:
            yield model

        monkeypatch.setattr(local_model, "_locked_model", locked)
        monkeypatch.setattr(local_model, "cached_model", lambda *_: model)  # loaded already
        return model

    return install


def tool_turn(**fields: Any) -> TurnRequest:
    options = {"model": "fake.gguf", "threads": 1, **fields.pop("options", {})}
    return TurnRequest(
        prompt=fields.pop("prompt", "Weather in Paris?"), options=options, tools=[WEATHER], **fields
    )


async def test_a_streamed_call_becomes_a_tool_call_event(fake_model: Any) -> None:
    fake_model(["Let me look", ".\n<tool", '_call>\n{"name": "get_weather", "arguments": ',
                '{"city": "Paris"}}\n</tool_call>'])  # fmt: skip
    events = await collect(fake_turn(tool_turn()))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["TextDelta", "TextDelta", "ToolCall", "Usage", "Final"]
    assert "".join(e.text for e in of_type(events, TextDelta)) == "Let me look.\n"
    assert of_type(events, ToolCall) == [CALL]
    assert events[-1] == Final("Let me look.\n")


async def test_a_plain_answer_with_tools_offered_is_all_text(fake_model: Any) -> None:
    fake_model(["It is ", "sunny <3"])
    events = await collect(fake_turn(tool_turn()))
    assert "".join(e.text for e in of_type(events, TextDelta)) == "It is sunny <3"
    assert events[-1] == Final("It is sunny <3")
    assert of_type(events, ToolCall) == []


async def test_a_forced_call_uses_the_grammar_and_streams_no_text(fake_model: Any) -> None:
    model = fake_model(['{"name": "get_weather", ', '"arguments": {"city": "Paris"}}'])
    events = await collect(fake_turn(tool_turn(options={"tool_choice": "get_weather"})))
    assert of_type(events, TextDelta) == []
    assert of_type(events, ToolCall) == [CALL]
    assert events[-1] == Final("")
    assert model.llama.grammars == [("grammar", call_schema([WEATHER]))]


async def test_forcing_a_tool_the_step_does_not_have_is_an_error(fake_model: Any) -> None:
    fake_model(["x"])
    with pytest.raises(ProviderError, match=r"options\.tool_choice names 'nope', which is not"):
        await collect(fake_turn(tool_turn(options={"tool_choice": "nope"})))


async def test_tool_choice_none_does_not_offer_the_tools(fake_model: Any) -> None:
    model = fake_model(['<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'])
    seen: list[str] = []
    render = model.render

    def spy(messages: list[Message], tools: list[ToolSpec] | None = None) -> Any:
        result = render(messages, tools)
        seen.append(result.prompt)
        return result

    model.render = spy
    events = await collect(fake_turn(tool_turn(options={"tool_choice": "none"})))
    assert of_type(events, ToolCall) == []  # not offered: the text is just text
    assert "get_weather" not in seen[-1]


async def test_a_tool_round_renders_calls_and_results(fake_model: Any) -> None:
    model = fake_model(["Paris is sunny, Rome rainy."])
    seen: list[str] = []
    render = model.render

    def spy(messages: list[Message], tools: list[ToolSpec] | None = None) -> Any:
        result = render(messages, tools)
        seen.append(result.prompt)
        return result

    model.render = spy
    request = tool_turn(prompt="", history=ROUND, continues=True)
    events = await collect(fake_turn(request))
    assert events[-1] == Final("Paris is sunny, Rome rainy.")
    prompt = seen[-1]
    assert (
        '<|im_start|>user\n<tool_response>\n{"name": "get_weather", "content": "sunny"}' in prompt
    )
    assert prompt.endswith(
        '"content": "rainy"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
    )


async def test_a_template_with_tools_renders_them_itself(fake_model: Any) -> None:
    model = fake_model(["ok"], template=TOOLS_TEMPLATE)
    prompt = model.render([Message("system", "sys"), *ROUND], [WEATHER]).prompt
    # (the formatter trims the newline after each block tag)
    assert prompt == (
        "<tools>get_weather;</tools>\n[system]sys[user]Weather in Paris and Rome?"
        '[assistant]call get_weather {"city": "Paris"};call get_weather {"city": "Rome"};'
        "[tool]call_1=sunny[tool]call_2=rainy[assistant]"
    )


def fake_turn(turn: TurnRequest) -> AsyncIterator[Any]:
    """`turn` generated on the fake model installed by `fake_model`."""
    return in_process(turn, Path("fake.gguf"))
