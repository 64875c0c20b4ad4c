"""Message lists for history-based providers, and fitting them into a context window.

History-based providers (`scripted`, `openai_compatible`, `local`) send
`[system] + history + new user message` every turn; a tool round (`turn.continues`) sends
`[system] + history` (the history already ends with the tool results). When that would not
fit the model's context window, the oldest exchanges are dropped — never the system
prompt, never the newest exchange, never an assistant message without the tool results
that answer its calls — and the caller records how many were dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from awf_nb.engine.ports import Message, Notice, TurnRequest
from awf_nb.engine.tokens import estimate_message_tokens as _estimate_contents
from awf_nb.engine.tokens import estimate_tokens

__all__ = [
    "build_messages",
    "estimate_message_tokens",
    "estimate_tokens",
    "exchanges",
    "fit_to_window",
    "truncation_notice",
]


def build_messages(turn: TurnRequest) -> list[Message]:
    """`[system] + history + user` for one turn (no system message when there is none).

    A tool round has no new user message: the model carries on from the tool results the
    history ends with."""
    messages: list[Message] = []
    if turn.system_prompt:
        messages.append(Message("system", turn.system_prompt))
    messages += [m for m in turn.history if m.role != "system"]
    if not turn.continues:
        messages.append(Message("user", turn.prompt))
    return messages


def estimate_message_tokens(messages: list[Message]) -> int:
    """The len/4 estimate of a message list, tool calls included (their name and arguments
    are sent too, and a tool round's history is mostly them)."""
    calls = sum(
        estimate_tokens(call.name) + estimate_tokens(call.arguments)
        for m in messages
        for call in m.tool_calls
    )
    return _estimate_contents(messages) + calls


def truncation_notice(dropped: int, window: int) -> Notice:
    """The notice a provider yields after dropping `dropped` exchanges to fit `window`."""
    noun = "exchange" if dropped == 1 else "exchanges"
    message = f"dropped the {dropped} oldest {noun} to fit the context window ({window} tokens)"
    return Notice(message, truncated_turns=dropped)


def exchanges(messages: list[Message]) -> list[list[Message]]:
    """`messages` (no system prompt) cut into exchanges: a user message with everything
    that follows it up to the next user message — the replies, and every assistant tool
    call with its results. Messages before the first user message (a stray reply from an
    interrupted turn) are an exchange of their own.

    Cutting only before user messages is what keeps a tool call with its result: tool
    messages always follow the assistant message that made the calls, within one exchange.
    """
    units: list[list[Message]] = []
    for message in messages:
        if message.role == "user" or not units:
            units.append([message])
        else:
            units[-1].append(message)
    return units


def fit_to_window(
    messages: list[Message],
    budget: int,
    count_tokens: Callable[[list[Message]], int],
) -> tuple[list[Message], int]:
    """Drop the oldest exchanges (see `exchanges`) until `count_tokens(messages) <= budget`.

    Returns the kept messages and the number of exchanges dropped. The system prompt and
    the newest exchange (the new user message; in a tool round, the user message with the
    calls and results since) are always kept. If even they do not fit, they are returned
    as they are (the provider reports the overflow) — silently losing the user's message,
    or the results the model is asked to carry on from, would be worse.
    """
    if budget <= 0 or count_tokens(messages) <= budget:
        return messages, 0
    head = [m for m in messages[:1] if m.role == "system"]
    units = exchanges(messages[len(head) :])
    newest = units.pop() if units else []
    starts = [0]  # where each exchange begins in `older`, and its end
    for unit in units:
        starts.append(starts[-1] + len(unit))
    older = messages[len(head) : len(head) + starts[-1]]

    def kept(dropped: int) -> list[Message]:
        return head + older[starts[dropped] :] + newest

    # The fewest exchanges to drop, by bisection: dropping more never adds tokens, and a
    # conversation far past its window is counted a few dozen times, not once per
    # exchange dropped (which made fitting it quadratic in its length).
    low, high = 1, len(units)  # dropping `high` (all of them) is the answer if none fits
    while low < high:
        middle = (low + high) // 2
        if count_tokens(kept(middle)) <= budget:
            high = middle
        else:
            low = middle + 1
    return kept(high), high
