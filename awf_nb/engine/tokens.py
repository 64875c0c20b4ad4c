"""The token estimate used when a provider reports no usage: characters / 4, rounded up.

One owner: the engine uses it for its running totals, history-based providers (scripted,
openai_compatible) for their Usage and for fitting a conversation into a context window.
"""

from __future__ import annotations

from awf_nb.engine.ports import Message


def tokens_for_chars(count: int) -> int:
    """The estimate for `count` characters of text."""
    return max(1, (count + 3) // 4) if count else 0


def estimate_tokens(text: str) -> int:
    """The estimate for one text."""
    return tokens_for_chars(len(text))


def estimate_message_tokens(messages: list[Message]) -> int:
    """The estimate for a message list (each message estimated on its own)."""
    return sum(estimate_tokens(m.content) for m in messages)
