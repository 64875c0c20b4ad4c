"""history.py: the message list of a turn, and fitting it into a context window without
separating a tool call from its results."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from awf_nb.engine.ports import Message, ToolCall, TurnRequest
from awf_nb.providers.history import (
    build_messages,
    estimate_message_tokens,
    exchanges,
    fit_to_window,
)


def words(messages: list[Message]) -> int:
    """A token count that is easy to reason about: one token per word, tool calls count 5."""
    return sum(len(m.content.split()) + 5 * len(m.tool_calls) for m in messages)


def call(n: int) -> ToolCall:
    return ToolCall(f"call_{n}", "get_weather", '{"city": "Paris"}')


SYSTEM = Message("system", "be brief")


def tool_exchange(n: int) -> list[Message]:
    """A user question answered after one tool round."""
    return [
        Message("user", f"question {n} here"),
        Message("assistant", "", tool_calls=(call(n),)),
        Message("tool", f"result {n} here", tool_call_id=f"call_{n}", name="get_weather"),
        Message("assistant", f"answer {n} here"),
    ]


def test_a_turn_ends_with_the_new_user_message() -> None:
    history = [Message("user", "hi"), Message("assistant", "hello")]
    turn = TurnRequest(prompt="more", system_prompt="sys", history=history)
    assert build_messages(turn) == [Message("system", "sys"), *history, Message("user", "more")]


def test_a_tool_round_has_no_new_user_message() -> None:
    history = tool_exchange(1)[:3]
    turn = TurnRequest(prompt="", system_prompt="sys", history=history, continues=True)
    assert build_messages(turn) == [Message("system", "sys"), *history]


def test_tool_calls_count_in_the_estimate() -> None:
    plain = [Message("assistant", "")]
    with_call = [Message("assistant", "", tool_calls=(call(1),))]
    assert estimate_message_tokens(plain) == 0
    assert estimate_message_tokens(with_call) > 0


def test_exchanges_cut_only_before_user_messages() -> None:
    stray = Message("assistant", "left over")
    units = exchanges([stray, *tool_exchange(1), *tool_exchange(2)])
    assert units == [[stray], tool_exchange(1), tool_exchange(2)]


def test_old_tool_exchanges_are_dropped_whole() -> None:
    messages = [SYSTEM, *tool_exchange(1), *tool_exchange(2), Message("user", "now")]
    budget = words([SYSTEM, *tool_exchange(2), Message("user", "now")])
    kept, dropped = fit_to_window(messages, budget, words)
    assert (kept, dropped) == ([SYSTEM, *tool_exchange(2), Message("user", "now")], 1)


def test_a_tool_round_keeps_its_calls_and_results() -> None:
    """In a tool round the newest exchange is the user message with the calls and results
    since: all of it stays, even when only it and the system prompt fit."""
    newest = tool_exchange(3)[:3]
    messages = [SYSTEM, *tool_exchange(1), *tool_exchange(2), *newest]
    kept, dropped = fit_to_window(messages, words([SYSTEM, *newest]), words)
    assert (kept, dropped) == ([SYSTEM, *newest], 2)


def test_the_newest_exchange_is_kept_even_when_it_does_not_fit() -> None:
    newest = tool_exchange(2)[:3]
    messages = [SYSTEM, *tool_exchange(1), *newest]
    kept, dropped = fit_to_window(messages, 1, words)
    assert (kept, dropped) == ([SYSTEM, *newest], 1)


def test_messages_that_fit_are_untouched() -> None:
    messages = [SYSTEM, *tool_exchange(1), Message("user", "now")]
    assert fit_to_window(messages, 10_000, words) == (messages, 0)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """System prompt, a mix of plain and tool exchanges, then a user message or a tool round."""
    messages = [SYSTEM]
    for n in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            messages += tool_exchange(n)
        else:
            messages += [Message("user", "q " * n), Message("assistant", "a " * n)]
    if draw(st.booleans()):
        messages += tool_exchange(99)[:3]
    else:
        messages.append(Message("user", "now"))
    return messages


@given(conversations(), st.integers(1, 80))
def test_no_call_is_ever_separated_from_its_result(messages: list[Message], budget: int) -> None:
    kept, dropped = fit_to_window(messages, budget, words)
    assert kept[0] == SYSTEM
    # The kept messages are a suffix of the conversation after the system prompt.
    assert kept[1:] == messages[len(messages) - len(kept) + 1 :]
    answered = {m.tool_call_id for m in kept if m.role == "tool"}
    called = {c.id for m in kept for c in m.tool_calls}
    assert answered == called
    assert kept[1].role == "user"
    assert dropped == len(exchanges(messages[1:])) - len(exchanges(kept[1:]))


def _dropping_one_at_a_time(
    messages: list[Message], budget: int, count: Callable[[list[Message]], int]
) -> tuple[list[Message], int]:
    """The rule spelled out: drop the oldest exchange until the rest fits."""
    if count(messages) <= budget:
        return messages, 0
    head, units = messages[:1], exchanges(messages[1:])
    newest, dropped = units.pop(), 0
    while units:
        units.pop(0)
        dropped += 1
        kept = head + [m for unit in units for m in unit] + newest
        if count(kept) <= budget:
            return kept, dropped
    return head + newest, dropped


@given(conversations(), st.integers(1, 80))
def test_the_window_drops_exactly_the_oldest_exchanges_that_must_go(
    messages: list[Message], budget: int
) -> None:
    assert fit_to_window(messages, budget, words) == _dropping_one_at_a_time(
        messages, budget, words
    )


def test_a_long_history_is_fitted_with_few_counts() -> None:
    """A conversation far past its window is not counted again for every exchange dropped
    (that is quadratic in its length): a thousand exchanges take a few dozen counts."""
    messages = [SYSTEM]
    for n in range(1000):
        messages += [Message("user", f"question {n}"), Message("assistant", f"answer {n}")]
    counted: list[int] = []

    def counting(candidate: list[Message]) -> int:
        counted.append(len(candidate))
        return words(candidate)

    kept, dropped = fit_to_window(messages, 40, counting)
    assert (kept, dropped) == _dropping_one_at_a_time(messages, 40, words)
    assert dropped == 991 and len(counted) <= 25
