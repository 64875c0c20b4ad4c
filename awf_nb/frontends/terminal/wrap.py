"""Streamed reply text broken into lines at word boundaries, for a terminal of a given width.

A terminal breaks a line that is too long wherever it reaches the right edge, often in the
middle of a word. `WordWrap` inserts the line breaks itself, between words, as the text
streams in: a word is held back until the space (or line end) after it arrives, then goes
on the current line if it fits, else on the next one (the spaces before it are dropped).
A word longer than a whole line is cut at the edge. Widths are display columns: East Asian
wide characters take two, combining marks none.
"""

from __future__ import annotations

import unicodedata

__all__ = ["WordWrap", "display_width"]

MIN_WIDTH = 20  # narrower terminals are wrapped as if this wide (a line per word is no help)


def char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal (one line of it)."""
    if text.isascii():
        return len(text)
    return sum(char_width(char) for char in text)


class WordWrap:
    """`feed(text)` → the text to write now, line breaks added; `flush()` → what is held."""

    def __init__(self, width: int, column: int = 0) -> None:
        self.width = max(width, MIN_WIDTH)
        self.column = column  # where the cursor is on its line (what was written)
        self._word: list[str] = []  # the word being received
        self._word_width = 0
        self._spaces = ""  # the whitespace after the last word written, not written yet

    def start(self, width: int, column: int = 0) -> None:
        """A new piece of text begins at `column` (e.g. after a label) of a `width` line."""
        self.width = max(width, MIN_WIDTH)
        self.column = column
        self._word, self._word_width, self._spaces = [], 0, ""

    def feed(self, text: str) -> str:
        out: list[str] = []
        for char in text:
            if char == "\n":
                self._put_word(out)
                out.append("\n")
                self.column, self._spaces = 0, ""
            elif char in " \t":
                self._put_word(out)
                self._spaces += " "  # a tab counts as one space: replies rarely hold one
            else:
                width = char_width(char)
                if self._word_width + width > self.width:  # longer than a line: cut it
                    self._put_word(out)
                    if self.column:
                        out.append("\n")
                        self.column = 0
                self._word.append(char)
                self._word_width += width
        return "".join(out)

    def flush(self) -> str:
        """The word held back (the text ended, or something else is written next)."""
        out: list[str] = []
        self._put_word(out)
        self._spaces = ""
        return "".join(out)

    def _put_word(self, out: list[str]) -> None:
        if not self._word:
            return
        word, width = "".join(self._word), self._word_width
        self._word, self._word_width = [], 0
        spaces = self._spaces
        self._spaces = ""
        if self.column and self.column + len(spaces) + width > self.width:
            out.append("\n")
            self.column = 0
            spaces = ""
        out.append(spaces + word)
        self.column += len(spaces) + width
