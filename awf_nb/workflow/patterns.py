"""Input `validation.pattern`: Go-style regular expressions, matched in linear time.

AWF is written in Go, whose regexp package is RE2: no backtracking, so no pattern can take
exponential time (Python's `re` took 16 s on 28 characters of `(a+)+$`). google-re2 speaks
the same syntax; a pattern RE2 refuses (look-behind, back-references) is a load error.
"""

from __future__ import annotations

import functools
from typing import Any


class PatternError(ValueError):
    pass


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # the error becomes our message, not a line on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise PatternError(f"invalid pattern {pattern!r}: {detail}") from None


def matches(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (as Go's MatchString)."""
    return compile_pattern(pattern).search(text) is not None
