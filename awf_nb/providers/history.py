"""Message lists for history-based providers, and fitting them into a context window.

History-based providers (`scripted`, `openai_compatible`, `local`) send
`[system] + history + new user message` every turn. When that would not fit the model's
context window, the oldest user/assistant pairs are dropped — never the system prompt,
never half a pair, never the new message — and the caller records how many were dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from awf_nb.engine.ports import Message, Notice, TurnRequest
from awf_nb.engine.tokens import estimate_message_tokens, estimate_tokens

__all__ = [
    "build_messages",
    "estimate_message_tokens",
    "estimate_tokens",
    "fit_to_window",
    "truncation_notice",
]


def build_messages(turn: TurnRequest) -> list[Message]:
    """`[system] + history + user` for one turn (no system message when there is none)."""
    messages: list[Message] = []
    if turn.system_prompt:
        messages.append(Message("system", turn.system_prompt))
    messages.extend(m for m in turn.history if m.role != "system")
    messages.append(Message("user", turn.prompt))
    return messages


def truncation_notice(dropped: int, window: int) -> Notice:
    """The notice a provider yields after dropping `dropped` exchanges to fit `window`."""
    noun = "exchange" if dropped == 1 else "exchanges"
    message = f"dropped the {dropped} oldest {noun} to fit the context window ({window} tokens)"
    return Notice(message, truncated_turns=dropped)


def fit_to_window(
    messages: list[Message],
    budget: int,
    count_tokens: Callable[[list[Message]], int],
) -> tuple[list[Message], int]:
    """Drop the oldest user/assistant pairs until `count_tokens(messages) <= budget`.

    Returns the kept messages and the number of pairs dropped. If even the system prompt
    plus the new message do not fit, they are returned as they are (the provider reports
    the overflow) — silently losing the user's message would be worse.
    """
    if budget <= 0 or count_tokens(messages) <= budget:
        return messages, 0
    head = [m for m in messages[:1] if m.role == "system"]
    body = messages[len(head) : -1]
    last = messages[-1:]
    dropped = 0
    while body and count_tokens(head + body + last) > budget:
        # A pair is a user message and the assistant reply that follows it; a stray
        # leading assistant message (e.g. from an interrupted turn) goes on its own.
        cut = 2 if len(body) >= 2 and body[0].role == "user" and body[1].role == "assistant" else 1
        body = body[cut:]
        dropped += 1
    return head + body + last, dropped
