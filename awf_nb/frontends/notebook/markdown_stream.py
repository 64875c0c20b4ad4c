"""Where a Markdown text that is still being streamed can be cut: before it, every block is
finished and renders the same whatever comes next.

A cut goes after a blank line, outside a fenced code block, once the next line has begun
at the margin (an indented line may continue a list item or an indented code block). The
scan is incremental — each call looks only at the lines added since the last one — so a
reply costs O(n) to follow however often it is flushed. Blocks rendered one by one can
differ from the whole text rendered at once in rare cases (a list whose items are
separated by blank lines, reference links defined later); the final rendering of the whole
reply replaces them.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")

__all__ = ["BlockCutter"]


class BlockCutter:
    """Follows one growing text; `cut(text)` is the end of its finished blocks so far."""

    def __init__(self) -> None:
        self._scanned = 0  # start of the first line not looked at yet
        self._fence = ""  # the opening fence while inside a fenced code block
        self._after_blank: int | None = None  # end of a blank line: a possible cut
        self.end = 0  # the cut: text[:end] is finished blocks

    def cut(self, text: str) -> int:
        """The end of the finished blocks of `text` (which only ever grows)."""
        while True:
            newline = text.find("\n", self._scanned)
            if newline < 0:
                break
            line = text[self._scanned : newline]
            self._look_at(line, self._scanned, newline + 1)
            self._scanned = newline + 1
        # A line still being written that has begun at the margin confirms a cut before it.
        rest = text[self._scanned :]
        if self._after_blank is not None and rest and not rest[0].isspace():
            self.end, self._after_blank = self._after_blank, None
        return self.end

    def _look_at(self, line: str, start: int, end: int) -> None:
        if self._fence:
            if _closes(line, self._fence):
                self._fence = ""
            return
        if not line.strip():
            self._after_blank = end
            return
        if self._after_blank is not None and not line[0].isspace():
            self.end = self._after_blank
        self._after_blank = None
        opening = _FENCE.match(line)
        if opening:
            self._fence = opening.group(1)


def _closes(line: str, fence: str) -> bool:
    """Whether `line` closes a code block opened by `fence` (same character, at least as
    long, nothing after it)."""
    closing = _FENCE.match(line)
    if closing is None:
        return False
    marks = closing.group(1)
    return marks[0] == fence[0] and len(marks) >= len(fence) and not line[closing.end() :].strip()
