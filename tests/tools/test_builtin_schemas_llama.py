"""The built-ins' schemas (from their pydantic models) against a real llama.cpp server:
with a named `tool_choice` the server turns the tool's schema into a grammar — a schema it
cannot read fails the request — and the arguments the model then writes pass the model's
own check."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from awf_nb.engine.ports import ToolCall, TurnRequest
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from awf_nb.tools.args import BashArgs, EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs, parse
from awf_nb.tools.builtins import SPECS
from tests.support import collect, of_type
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.real_server

MODELS = {
    "Read": ReadArgs,
    "Write": WriteArgs,
    "Edit": EditArgs,
    "Bash": BashArgs,
    "Glob": GlobArgs,
    "Grep": GrepArgs,
}


@pytest.fixture
async def provider() -> AsyncIterator[OpenAICompatibleProvider]:
    instance = OpenAICompatibleProvider()
    yield instance
    await instance.aclose()


@pytest.mark.parametrize("name", list(MODELS))
async def test_a_real_server_builds_a_grammar_from_each_builtin_schema(
    llama_server: str, provider: OpenAICompatibleProvider, name: str
) -> None:
    with RecordingProxy(llama_server) as proxy:
        request = TurnRequest(
            prompt=f"Use the {name} tool on the file notes.txt.",
            tools=list(SPECS.values()),
            options={
                "base_url": proxy.base_url,
                "model": "smollm2",
                "max_tokens": 256,
                "max_tokens_field": "max_tokens",
                "temperature": 0,
                "seed": 1,
                "tool_choice": name,
            },
        )
        events = await collect(provider.stream(request))
    sent = {
        tool["function"]["name"]: tool["function"]["parameters"]
        for tool in proxy.requests[-1]["tools"]
    }
    assert sent[name] == SPECS[name].parameters  # what the model shows is what is sent
    [call] = of_type(events, ToolCall)
    assert call.name == name
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        # The tiny model can ramble inside a string until max_tokens: the grammar still
        # held it to the schema's keys, which is what this checks then.
        first_key = call.arguments.split('"')[1]
        assert first_key in SPECS[name].parameters["properties"]
        return
    parse(MODELS[name], arguments)  # the grammar's output passes the model's check
