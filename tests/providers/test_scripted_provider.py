"""The scripted provider: replies in order, errors, echo, chunking, delays, resume."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from awf_nb.engine.ports import (
    Final,
    Message,
    Notice,
    Provider,
    TextDelta,
    ToolUse,
    TurnRequest,
    Usage,
)
from awf_nb.errors import ProviderError
from awf_nb.providers.history import estimate_tokens
from awf_nb.providers.scripted import CHUNK_CHARS, ScriptedProvider, split_chunks
from tests.support import collect, of_type


def turn(prompt: str = "hello", step: str = "chat", number: int = 1, **options: Any) -> TurnRequest:
    return TurnRequest(prompt=prompt, step=step, turn_number=number, options=options)


async def reply_text(provider: ScriptedProvider, request: TurnRequest) -> str:
    events = await collect(provider.stream(request))
    final = events[-1]
    assert isinstance(final, Final)
    return final.text


def test_is_a_history_based_provider() -> None:
    provider = ScriptedProvider()
    assert isinstance(provider, Provider)
    assert provider.session_kind == "history"
    assert provider.name == "scripted"


async def test_replies_are_served_in_order() -> None:
    provider = ScriptedProvider()
    replies = ["one", "two", "three"]
    texts = [await reply_text(provider, turn(number=n, replies=replies)) for n in (1, 2, 3)]
    assert texts == replies


async def test_each_step_has_its_own_counter() -> None:
    provider = ScriptedProvider()
    assert await reply_text(provider, turn(step="a", replies=["a1", "a2"])) == "a1"
    assert await reply_text(provider, turn(step="b", replies=["b1"])) == "b1"
    assert await reply_text(provider, turn(step="a", number=2, replies=["a1", "a2"])) == "a2"


async def test_a_used_up_list_fails_the_turn() -> None:
    provider = ScriptedProvider()
    await reply_text(provider, turn(replies=["only"]))
    with pytest.raises(ProviderError) as caught:
        await reply_text(provider, turn(number=2, replies=["only"]))
    assert str(caught.value) == "scripted: no more replies"
    assert caught.value.provider == "scripted"
    assert not caught.value.retryable


async def test_an_empty_list_has_no_replies() -> None:
    with pytest.raises(ProviderError, match="no more replies"):
        await reply_text(ScriptedProvider(), turn(replies=[]))


async def test_error_entries_fail_the_turn_and_use_up_their_slot() -> None:
    provider = ScriptedProvider()
    replies: list[Any] = [{"error": "model overloaded"}, "recovered"]
    with pytest.raises(ProviderError) as caught:
        await reply_text(provider, turn(replies=replies))
    assert str(caught.value) == "scripted: model overloaded"
    assert not caught.value.retryable
    assert caught.value.retry_after is None
    # The engine's retry asks again and gets the next entry.
    assert await reply_text(provider, turn(replies=replies)) == "recovered"


async def test_error_entries_can_be_retryable() -> None:
    replies = [{"error": "rate limited", "retryable": True, "retry_after": 0.25}]
    with pytest.raises(ProviderError) as caught:
        await reply_text(ScriptedProvider(), turn(replies=replies))
    assert caught.value.retryable
    assert caught.value.retry_after == 0.25


async def test_no_event_is_streamed_before_a_scripted_error() -> None:
    events: list[object] = []
    with pytest.raises(ProviderError):
        async for event in ScriptedProvider().stream(turn(replies=[{"error": "x"}])):
            events.append(event)
    assert events == []


async def test_echo_mode_replies_with_the_prompt() -> None:
    provider = ScriptedProvider()
    assert await reply_text(provider, turn("what did I say?")) == "what did I say?"
    assert await reply_text(provider, turn("and now?", number=2)) == "and now?"


async def test_numbers_are_replies_too() -> None:
    assert await reply_text(ScriptedProvider(), turn(replies=[42])) == "42"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replies": "just one"}, "options.replies must be a list of items, each a string,"),
        (
            {"replies": [["nested"]]},
            "options.replies[0] must be a string, a number, {error, retryable, retry_after} or "
            "{tool_calls, text} "
            "(got ['nested'])",
        ),
        ({"replies": [True]}, "options.replies[0] must be a string, a number, {error,"),
        ({"delay_ms": -1}, "options.delay_ms must be a number >= 0 (got -1)"),
        ({"delay_ms": "fast"}, "options.delay_ms must be a number >= 0 (got 'fast')"),
        ({"fail_after_chars": 2.5}, "options.fail_after_chars must be a whole number >= 0"),
        ({"context_window": True}, "options.context_window must be a whole number >= 0"),
        ({"tool_uses": "grep"}, "options.tool_uses must be a list of items, each a tool name"),
        ({"tool_uses": [{"argument": "x"}]}, "options.tool_uses[0].name is required"),
        (
            {"replies": [{"error": "x", "retry_after": "soon"}]},
            "options.replies[0].retry_after must be a number >= 0 (got 'soon')",
        ),
        (
            {"replies": [{"eror": "x"}]},
            "options.replies[0].error is required; options.replies[0].eror is not a known "
            "field of {error, retryable, retry_after}",
        ),
        ({"reply": ["x"]}, 'unknown option "reply" (did you mean "replies"?)'),
    ],
)
async def test_bad_options_are_clear_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ProviderError) as caught:
        await reply_text(ScriptedProvider(), turn(**options))
    assert str(caught.value).startswith(f"scripted: {message}")


async def test_bad_options_do_not_use_up_a_reply() -> None:
    provider = ScriptedProvider()
    with pytest.raises(ProviderError):
        await reply_text(provider, turn(replies=["first"], delay_ms=-1))
    assert await reply_text(provider, turn(replies=["first"])) == "first"


async def test_replies_stream_in_small_wordish_chunks() -> None:
    reply = "A reply long enough to be streamed in many pieces, supercalifragilistic!"
    events = await collect(ScriptedProvider().stream(turn(replies=[reply])))
    deltas = [e.text for e in of_type(events, TextDelta)]
    assert "".join(deltas) == reply
    assert len(deltas) > 5
    assert all(0 < len(d) <= CHUNK_CHARS for d in deltas)
    assert deltas[:3] == ["A ", "reply ", "long "]


@given(st.text())
def test_split_chunks_joins_back_and_stays_small(text: str) -> None:
    chunks = list(split_chunks(text))
    assert "".join(chunks) == text
    assert all(0 < len(chunk) <= CHUNK_CHARS for chunk in chunks)


async def test_events_come_in_contract_order() -> None:
    history = [Message("user", "earlier question"), Message("assistant", "earlier answer")]
    request = TurnRequest(
        prompt="a question",
        system_prompt="be brief",
        history=history,
        options={"replies": ["the answer"], "tool_uses": [{"name": "grep", "argument": "x"}]},
    )
    events = await collect(ScriptedProvider().stream(request))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolUse", "TextDelta", "TextDelta", "Usage", "Final"]
    assert events[0] == ToolUse("grep", "x")
    assert events[-1] == Final("the answer")


async def test_usage_is_a_len_over_4_estimate_of_all_messages_and_the_reply() -> None:
    history = [Message("user", "u" * 40), Message("assistant", "a" * 20)]
    request = TurnRequest(
        prompt="p" * 8, system_prompt="s" * 12, history=history, options={"replies": ["r" * 9]}
    )
    (usage,) = of_type(await collect(ScriptedProvider().stream(request)), Usage)
    assert usage == Usage(input_tokens=3 + 10 + 5 + 2, output_tokens=3, estimated=True)
    assert usage.output_tokens == estimate_tokens("r" * 9)


async def test_tool_uses_come_first_on_every_turn() -> None:
    options = {"replies": ["x", "y"], "tool_uses": ["read_file", {"name": "grep", "argument": 7}]}
    provider = ScriptedProvider()
    for number in (1, 2):
        events = await collect(provider.stream(turn(number=number, **options)))
        assert events[:2] == [ToolUse("read_file", ""), ToolUse("grep", "7")]


async def test_delay_paces_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake clock: the pauses are recorded instead of waited for.
    paused: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args: object) -> None:
        paused.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    events = await collect(ScriptedProvider().stream(turn(replies=["a b c d e"], delay_ms=30)))
    assert len(of_type(events, TextDelta)) == 5
    assert paused == [0.03] * 4  # one pause between each two of the five chunks


async def test_cancelling_a_delayed_stream_stops_it_promptly() -> None:
    provider = ScriptedProvider()
    received: list[str] = []
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(turn(replies=["word " * 200], delay_ms=100)):
            if isinstance(event, TextDelta):
                received.append(event.text)
                first_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), timeout=5)
    task.cancel()  # while the provider waits 100 ms before the second chunk
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(received) == 1, "the pause was cut short: no chunk came after the cancel"


async def test_closing_the_generator_stops_it() -> None:
    stream = ScriptedProvider().stream(turn(replies=["one two three"], delay_ms=10))
    first = await anext(stream)
    assert first == TextDelta("one ")
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_a_resumed_conversation_continues_with_the_next_reply() -> None:
    provider = ScriptedProvider()
    replies = ["r1", "r2", "r3", "r4"]
    # `awf resume` restored two turns: the first request of this run is turn 3.
    assert await reply_text(provider, turn(number=3, replies=replies)) == "r3"
    assert await reply_text(provider, turn(number=4, replies=replies)) == "r4"


async def test_the_counter_follows_calls_after_the_first() -> None:
    # A loop re-entering the step (turn 1 again) gets the next reply, not the first again.
    provider = ScriptedProvider()
    assert await reply_text(provider, turn(replies=["r1", "r2"])) == "r1"
    assert await reply_text(provider, turn(replies=["r1", "r2"])) == "r2"


async def test_fail_after_chars_streams_then_fails() -> None:
    events: list[object] = []
    with pytest.raises(ProviderError) as caught:
        async for event in ScriptedProvider().stream(
            turn(replies=["Hello wonderful world"], fail_after_chars=9)
        ):
            events.append(event)
    assert "".join(e.text for e in of_type(events, TextDelta)) == "Hello won"
    assert not of_type(events, Final)
    assert str(caught.value) == "scripted: stream failed after 9 characters (fail_after_chars)"
    assert caught.value.retryable  # the engine must still refuse: text was streamed


async def test_fail_after_zero_chars_fails_before_any_text() -> None:
    events: list[object] = []
    with pytest.raises(ProviderError, match="after 0 characters"):
        async for event in ScriptedProvider().stream(turn(replies=["Hi"], fail_after_chars=0)):
            events.append(event)
    assert events == []


async def test_context_window_drops_the_oldest_exchanges_with_a_notice() -> None:
    history = [
        Message("user", "q" * 400),
        Message("assistant", "a" * 400),
        Message("user", "q" * 40),
        Message("assistant", "a" * 40),
    ]
    request = TurnRequest(
        prompt="p" * 40,
        system_prompt="s" * 40,
        history=history,
        options={"replies": ["ok"], "context_window": 100},
    )
    events = await collect(ScriptedProvider().stream(request))
    (notice,) = of_type(events, Notice)
    assert notice.truncated_turns == 1
    assert "dropped the 1 oldest exchange" in notice.message
    (usage,) = of_type(events, Usage)
    assert usage.input_tokens == 4 * 10  # system + the kept pair + the new prompt
    assert isinstance(events[-1], Final)


async def test_no_notice_when_the_history_fits() -> None:
    request = TurnRequest(prompt="short", options={"replies": ["ok"], "context_window": 100})
    assert not of_type(await collect(ScriptedProvider().stream(request)), Notice)


async def test_aclose_is_harmless() -> None:
    provider = ScriptedProvider()
    await provider.aclose()
    assert await reply_text(provider, turn(replies=["still works"])) == "still works"
