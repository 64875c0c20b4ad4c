"""openai_compatible against a real peer: `python -m llama_cpp.server` running SmolLM2.

llama-cpp-python's server streams no usage chunk (it ignores `stream_options`) and
silently ignores `max_completion_tokens`, so these turns force `max_tokens_field:
max_tokens` to keep answers short, and usage comes from the len/4 estimate.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awf_nb.engine.ports import Final, Message, TextDelta, TurnRequest, Usage
from awf_nb.providers.openai_compatible import OpenAICompatibleProvider
from tests.support import collect, of_type
from tests.support.recording_proxy import RecordingProxy

pytestmark = pytest.mark.real_server

MAX_TOKENS = 16


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
    with RecordingProxy(llama_server) as proxy:
        long_turn = TurnRequest(
            prompt="Write a long story about a lighthouse keeper.",  # SmolLM2 writes > 400 tokens
            options=options(proxy.base_url, max_tokens=long_answer),
        )
        deltas: list[str] = []
        enough = asyncio.Event()

        async def consume() -> None:
            async for event in provider.stream(long_turn):
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
                    if len(deltas) == seen:
                        enough.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(enough.wait(), timeout=60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The cancel closed the connection: the proxy saw its client go away mid-reply and
        # dropped the upstream connection, which stops llama.cpp's generation.
        assert await asyncio.to_thread(proxy.wait_until_ended, 0) == "abandoned"
        events = await collect(
            provider.stream(TurnRequest(prompt="Hi", options=options(proxy.base_url)))
        )
        assert isinstance(events[-1], Final)
        assert events[-1].text.strip(), "the server answered the next request"
        assert await asyncio.to_thread(proxy.wait_until_ended, 1) == "completed"
    assert len(deltas) < long_answer
