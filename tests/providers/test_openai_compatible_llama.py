"""openai_compatible against a real peer: `python -m llama_cpp.server` running SmolLM2.

llama-cpp-python's server streams no usage chunk (it ignores `stream_options`) and
silently ignores `max_completion_tokens`, so these turns force `max_tokens_field:
max_tokens` to keep answers short, and usage comes from the len/4 estimate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, TurnRequest, Usage
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from tests.support import collect, of_type
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.real_server

MAX_TOKENS = 16


@pytest.fixture
async def provider() -> AsyncIterator[OpenAICompatibleProvider]:
    instance = OpenAICompatibleProvider()
    yield instance
    await instance.aclose()


def options(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "model": "smollm2",
        "max_tokens": MAX_TOKENS,
        "max_tokens_field": "max_tokens",
        "temperature": 0,
        "seed": 1,
        **extra,
    }


async def test_a_real_server_streams_a_reply(
    llama_server: str, provider: OpenAICompatibleProvider
) -> None:
    request = TurnRequest(prompt="Name three colors.", options=options(llama_server))
    events = await collect(provider.stream(request))
    deltas = of_type(events, TextDelta)
    (usage,) = of_type(events, Usage)
    final = events[-1]
    assert isinstance(final, Final)
    assert len(deltas) >= 2, "the answer should arrive in pieces"
    assert len(deltas) <= MAX_TOKENS  # llama.cpp streams at most one piece per token
    assert final.text == "".join(d.text for d in deltas)
    assert final.text.strip()
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    if not usage.estimated:  # a server version that does report usage
        assert usage.output_tokens <= MAX_TOKENS


async def test_a_real_server_receives_the_history(
    llama_server: str, provider: OpenAICompatibleProvider
) -> None:
    history = [
        Message("user", "Which country is shaped like a boot?"),
        Message("assistant", "Italy is shaped like a boot."),
    ]
    with RecordingProxy(llama_server) as proxy:
        turn = TurnRequest(
            prompt="And what is its capital?",
            system_prompt="You are a concise geography tutor.",
            history=history,
            options=options(proxy.base_url),
        )
        events = await collect(provider.stream(turn))
    reply = events[-1]
    assert isinstance(reply, Final)
    assert reply.text.strip(), "the real server answered"
    (sent,) = proxy.requests
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [
        ("system", "You are a concise geography tutor."),
        ("user", "Which country is shaped like a boot?"),
        ("assistant", "Italy is shaped like a boot."),
        ("user", "And what is its capital?"),
    ]


async def test_cancelling_frees_the_real_server(
    llama_server: str, provider: OpenAICompatibleProvider
) -> None:
    long_answer, seen = 400, 10
    long_turn = TurnRequest(
        prompt="Write a long story about a lighthouse keeper.",  # SmolLM2 writes > 400 tokens
        options=options(llama_server, max_tokens=long_answer),
    )
    arrivals: list[float] = []
    enough = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(long_turn):
            if isinstance(event, TextDelta):
                arrivals.append(time.monotonic())
                if len(arrivals) == seen:
                    enough.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(enough.wait(), timeout=60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    seconds_per_token = (arrivals[seen - 1] - arrivals[0]) / (seen - 1)
    # The server runs one completion at a time. Had it kept generating the abandoned story,
    # the next answer would wait for the ~390 tokens left; measured against the speed seen
    # just now, so a busy machine does not make the test flaky.
    started = time.monotonic()
    events = await collect(provider.stream(TurnRequest(prompt="Hi", options=options(llama_server))))
    assert isinstance(events[-1], Final)
    assert time.monotonic() - started < 0.5 * (long_answer - seen) * seconds_per_token
