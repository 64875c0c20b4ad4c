"""Did-you-mean suggestions for names a person mistyped (keys, steps, tools, providers)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f'did you mean "{close[0]}"?' if close else None
