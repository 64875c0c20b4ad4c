"""The condition lexer: turns a condition's text into tokens, each with its 1-based column.

A condition written like a template (`{{ .inputs.x }}`) gets a hint with the plain
expression it should have been.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from awf_nb.workflow.expr.errors import _syntax_error
from awf_nb.workflow.expr.values import _shorten


@dataclass(frozen=True)
class Token:
    kind: str  # "number" | "string" | "name" | "op" | "end"
    value: Any
    column: int
    text: str  # as written, for error messages

    def shown(self) -> str:
        return json.dumps(_shorten(self.text), ensure_ascii=False)


_TWO_CHAR_OPS = frozenset({"==", "!=", "<=", ">=", "&&", "||"})
_ONE_CHAR_OPS = frozenset("<>!+-*/%()[],.")
_CHARACTER_HINTS = {
    "=": "use == to compare",
    "&": "use && or and",
    "|": "use || or or",
    "?": "conditions have no ?: operator; use and/or",
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "`": "`"}
_DIGITS = frozenset("0123456789")


class TemplateBraces(Exception):
    """`{{` in a condition, at 1-based `column` (turned into an ExprSyntaxError by the
    parser, with a hint)."""

    def __init__(self, column: int) -> None:
        super().__init__(column)
        self.column = column


def _is_name_start(char: str) -> bool:
    return char.isalpha() or char == "_"


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char == "_"


class _Lexer:
    """Turns a condition's text into tokens, each with its 1-based column."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0

    def tokens(self) -> list[Token]:
        found: list[Token] = []
        while True:
            self._skip_space()
            if self.pos >= len(self.source):
                found.append(Token("end", None, self.pos + 1, ""))
                return found
            found.append(self._next())

    def _skip_space(self) -> None:
        while self.pos < len(self.source) and self.source[self.pos].isspace():
            self.pos += 1

    def _next(self) -> Token:
        start, char = self.pos, self.source[self.pos]
        if char in "'\"":
            return self._string(start, char)
        if char == "`":
            return self._raw_string(start)
        if char in _DIGITS:
            return self._number(start)
        if _is_name_start(char):
            return self._name(start)
        pair = self.source[start : start + 2]
        if pair == "{{":
            # the parser words it, with the condition rewritten without braces (it can
            # tell whether that parses; this module comes before the parser)
            raise TemplateBraces(start + 1)
        if pair in _TWO_CHAR_OPS:
            self.pos += 2
            return Token("op", pair, start + 1, pair)
        if char in _ONE_CHAR_OPS:
            self.pos += 1
            return Token("op", char, start + 1, char)
        shown = json.dumps(char, ensure_ascii=False)
        raise _syntax_error(
            f"unexpected character {shown}", start + 1, _CHARACTER_HINTS.get(char, "")
        )

    def _string(self, start: int, quote: str) -> Token:
        chars: list[str] = []
        pos = start + 1
        while pos < len(self.source):
            char = self.source[pos]
            if char == quote:
                self.pos = pos + 1
                return Token("string", "".join(chars), start + 1, self.source[start : pos + 1])
            if char == "\\" and pos + 1 < len(self.source):
                escaped = self.source[pos + 1]
                # an unknown escape keeps its backslash, so regexes like '\d+' work unescaped
                chars.append(_ESCAPES.get(escaped, "\\" + escaped))
                pos += 2
                continue
            chars.append(char)
            pos += 1
        raise _syntax_error("unterminated string starting", start + 1)

    def _raw_string(self, start: int) -> Token:
        end = self.source.find("`", start + 1)
        if end < 0:
            raise _syntax_error("unterminated string starting", start + 1)
        self.pos = end + 1
        return Token(
            "string", self.source[start + 1 : end], start + 1, self.source[start : end + 1]
        )

    def _scan_digits(self, pos: int) -> int:
        while pos < len(self.source) and (self.source[pos] in _DIGITS or self.source[pos] == "_"):
            pos += 1
        return pos

    def _number(self, start: int) -> Token:
        source = self.source
        pos = self._scan_digits(start)
        is_float = False
        # `1.5` is a float, but `1.x` is the field x of 1 (nil), as in a path
        if source[pos : pos + 1] == "." and source[pos + 1 : pos + 2] in _DIGITS:
            pos, is_float = self._scan_digits(pos + 1), True
        if source[pos : pos + 1] in ("e", "E"):
            exponent = pos + 1
            if source[exponent : exponent + 1] in ("+", "-"):
                exponent += 1
            if source[exponent : exponent + 1] in _DIGITS:
                pos, is_float = self._scan_digits(exponent), True
        end = pos
        while end < len(source) and _is_name_char(source[end]):
            end += 1
        text = source[start:end]
        if end > pos:
            raise _syntax_error(f"invalid number {json.dumps(_shorten(text))}", start + 1)
        try:
            value: int | float = float(text) if is_float else int(text)
        except ValueError:  # misplaced `_`, or more digits than Python converts
            raise _syntax_error(f"invalid number {json.dumps(_shorten(text))}", start + 1) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise _syntax_error(f"number too large {json.dumps(_shorten(text))}", start + 1)
        self.pos = pos
        return Token("number", value, start + 1, text)

    def _name(self, start: int) -> Token:
        pos = start + 1
        while pos < len(self.source) and _is_name_char(self.source[pos]):
            pos += 1
        self.pos = pos
        text = self.source[start:pos]
        return Token("name", text, start + 1, text)
