"""The template lexer: splits a source into Go's `text/template` tokens.

Same tokens, trim-marker rules and error wording as Go's `text/template/parse` lexer; the
parser (`parser.py`) reads the token list it produces.
"""

from __future__ import annotations

from typing import NamedTuple

from awf_nb.workflow.template.values import _go_quote

_ACTION_SPACE = " \t\r\n"  # what Go treats as space inside actions and for trim markers

# --- lexer ------------------------------------------------------------------------------------
# Token kinds. Keywords use their own word as kind ("if", "end", ...), as Go has one item
# type per keyword.
_TEXT, _LEFT, _RIGHT, _SPACE = "text", "{{", "}}", "space"
_FIELD, _DOT, _VARIABLE, _IDENT = "field", ".", "variable", "identifier"
_BOOL, _NIL, _NUMBER, _CHAR_CONSTANT = "bool", "nil", "number", "character constant"
_STRING, _RAW_STRING = "string", "raw string"
_PIPE, _LPAREN, _RPAREN, _DECLARE, _ASSIGN, _CHAR = "|", "(", ")", ":=", "=", "char"
_EOF, _ERROR = "EOF", "error"
_KEYWORDS = frozenset(
    {"block", "break", "continue", "define", "else", "end", "if", "range", "template", "with"}
)
_OPERAND_START = frozenset(
    {
        _BOOL,
        _CHAR_CONSTANT,
        _DOT,
        _FIELD,
        _IDENT,
        _NUMBER,
        _NIL,
        _RAW_STRING,
        _STRING,
        _VARIABLE,
        _LPAREN,
    }
)


class _Token(NamedTuple):
    kind: str
    text: str
    pos: int  # offset of the token in the source

    @property
    def end(self) -> int:
        return self.pos + len(self.text)

    def describe(self) -> str:
        """The token as Go's parse errors show it (`"}"`, `<end>`, `EOF`)."""
        if self.kind == _EOF:
            return "EOF"
        if self.kind == _ERROR:
            return self.text
        if self.kind in _KEYWORDS or self.kind in (_DOT, _NIL):
            return f"<{self.text}>"
        if len(self.text) > 10:
            return _go_quote(self.text[:10]) + "..."
        return _go_quote(self.text)


class _LexError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


# What Go's lexer accepts in a number, by base prefix (it validates the text later).
_DECIMAL_DIGITS = "0123456789_"
_HEX_DIGITS = "0123456789abcdefABCDEF_"
_BASE_DIGITS = {"x": _HEX_DIGITS, "o": "01234567_", "b": "01_"}
_EXPONENT_MARKS = {_DECIMAL_DIGITS: "eE", _HEX_DIGITS: "pP"}


def _is_alnum(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdecimal()


def _go_rune(char: str) -> str:
    """A character as Go's `%#U` shows it: `U+0040 '@'`."""
    code = f"U+{ord(char):04X}"
    return f"{code} '{char}'" if char.isprintable() else code


class _Lexer:
    """Splits a template into Go's tokens: text, delimiters, and the words inside actions.

    Spaces inside actions are tokens, as in Go, because they separate arguments
    (`.a .b` is two arguments, `.a.b` one chain). A lexing error becomes an `_ERROR` token
    so the parser reports errors in source order, as Go's concurrent lexer does.
    """

    def __init__(self, source: str) -> None:
        self.src = source
        self.tokens: list[_Token] = []
        self.paren_depth = 0

    def run(self) -> list[_Token]:
        src = self.src
        try:
            pos = 0
            while pos < len(src):
                pos = self._text(pos)
                if pos < len(src):
                    pos = self._action(pos)
        except _LexError as err:
            self.tokens.append(_Token(_ERROR, err.message, err.pos))
            return self.tokens
        self.tokens.append(_Token(_EOF, "", len(src)))
        return self.tokens

    def _emit(self, kind: str, start: int, end: int) -> int:
        self.tokens.append(_Token(kind, self.src[start:end], start))
        return end

    def _text(self, pos: int) -> int:
        src = self.src
        left = src.find("{{", pos)
        if left < 0:
            return self._emit(_TEXT, pos, len(src))
        end = left
        if self._left_trim_at(left + 2):
            end = pos + len(src[pos:left].rstrip(_ACTION_SPACE))
        if end > pos:
            self._emit(_TEXT, pos, end)
        return left

    def _left_trim_at(self, pos: int) -> bool:
        # "{{- " trims; "{{-3" is the number -3: the marker must be followed by a space.
        src = self.src
        return pos + 1 < len(src) and src[pos] == "-" and src[pos + 1] in _ACTION_SPACE

    def _right_delim_at(self, pos: int) -> tuple[bool, bool]:
        """(is there a closing delimiter at pos, does it trim: " -}}")."""
        src = self.src
        if pos < len(src) and src[pos] in _ACTION_SPACE and src.startswith("-}}", pos + 1):
            return True, True
        return src.startswith("}}", pos), False

    def _skip_space(self, pos: int) -> int:
        src = self.src
        while pos < len(src) and src[pos] in _ACTION_SPACE:
            pos += 1
        return pos

    def _action(self, start: int) -> int:
        after = start + 2
        if self._left_trim_at(after):
            after += 2
        if self.src.startswith("/*", after):
            return self._comment(start, after)
        self._emit(_LEFT, start, start + 2)
        self.paren_depth = 0
        pos = after
        while True:
            at_delim, trim = self._right_delim_at(pos)
            if at_delim:
                if self.paren_depth:
                    raise _LexError("unclosed left paren", pos)
                return self._right_delim(pos, trim)
            if pos >= len(self.src):
                raise _LexError("unclosed action", start)
            pos = self._inside_action(pos)

    def _right_delim(self, pos: int, trim: bool) -> int:
        if trim:
            pos += 2
        pos = self._emit(_RIGHT, pos, pos + 2)
        return self._skip_space(pos) if trim else pos

    def _comment(self, start: int, after: int) -> int:
        close = self.src.find("*/", after + 2)
        if close < 0:
            raise _LexError("unclosed comment", start)
        pos = close + 2
        at_delim, trim = self._right_delim_at(pos)
        if not at_delim:
            raise _LexError("comment ends before closing delimiter", pos)
        pos += 4 if trim else 2
        return self._skip_space(pos) if trim else pos

    def _inside_action(self, pos: int) -> int:
        src = self.src
        char = src[pos]
        if char in _ACTION_SPACE:
            return self._space(pos)
        if char == "=":
            return self._emit(_ASSIGN, pos, pos + 1)
        if char == ":":
            if src.startswith(":=", pos):
                return self._emit(_DECLARE, pos, pos + 2)
            raise _LexError("expected :=", pos)
        if char == "|":
            return self._emit(_PIPE, pos, pos + 1)
        if char == '"':
            return self._quoted(pos, '"', "unterminated quoted string", _STRING)
        if char == "'":
            return self._quoted(pos, "'", "unterminated character constant", _CHAR_CONSTANT)
        if char == "`":
            return self._raw_string(pos)
        if char == "$":
            return self._field_or_variable(pos, _VARIABLE)
        if char == "." and not (pos + 1 < len(src) and src[pos + 1].isdigit()):
            return self._field_or_variable(pos, _FIELD)
        if char in "+-." or "0" <= char <= "9":
            return self._number(pos)
        if _is_alnum(char):
            return self._identifier(pos)
        return self._punctuation(pos, char)

    def _punctuation(self, pos: int, char: str) -> int:
        if char == "(":
            self.paren_depth += 1
            return self._emit(_LPAREN, pos, pos + 1)
        if char == ")":
            self.paren_depth -= 1
            if self.paren_depth < 0:
                raise _LexError("unexpected right paren", pos)
            return self._emit(_RPAREN, pos, pos + 1)
        if " " <= char <= "~":
            return self._emit(_CHAR, pos, pos + 1)
        raise _LexError(f"unrecognized character in action: {_go_rune(char)}", pos)

    def _space(self, pos: int) -> int:
        end = self._skip_space(pos)
        if self.src.startswith("-}}", end):
            end -= 1  # the last space belongs to a trimming " -}}"
        if end == pos:
            return pos
        return self._emit(_SPACE, pos, end)

    def _at_terminator(self, pos: int) -> bool:
        src = self.src
        return pos >= len(src) or src[pos] in " \t\r\n.,|:()" or src.startswith("}}", pos)

    def _field_or_variable(self, pos: int, kind: str) -> int:
        first = pos + 1
        if self._at_terminator(first):  # a lone "." or "$"
            return self._emit(_DOT if kind == _FIELD else _VARIABLE, pos, first)
        end = first
        while end < len(self.src) and _is_alnum(self.src[end]):
            end += 1
        if not self._at_terminator(end):
            raise _LexError(f"bad character {_go_rune(self.src[end])}", end)
        return self._emit(kind, pos, end)

    def _identifier(self, pos: int) -> int:
        end = pos
        while end < len(self.src) and _is_alnum(self.src[end]):
            end += 1
        if not self._at_terminator(end):
            raise _LexError(f"bad character {_go_rune(self.src[end])}", end)
        word = self.src[pos:end]
        if word in _KEYWORDS:
            kind = word
        elif word == "nil":
            kind = _NIL
        elif word in ("true", "false"):
            kind = _BOOL
        else:
            kind = _IDENT
        return self._emit(kind, pos, end)

    def _number(self, pos: int) -> int:
        end = self._scan_number(pos)
        if end < len(self.src) and self.src[end] in "+-":  # a complex constant like 1+2i
            end = self._scan_number(end)
            if self.src[end - 1] != "i":
                raise _LexError(f"bad number syntax: {_go_quote(self.src[pos:end])}", pos)
        return self._emit(_NUMBER, pos, end)

    def _scan_number(self, pos: int) -> int:
        src = self.src

        def accept_run(end: int, chars: str) -> int:
            while end < len(src) and src[end] in chars:
                end += 1
            return end

        end = pos + 1 if src[pos] in "+-" else pos  # one optional sign
        digits = _DECIMAL_DIGITS
        if src.startswith("0", end):
            end += 1
            base = src[end : end + 1].lower()
            if base and base in _BASE_DIGITS:
                digits, end = _BASE_DIGITS[base], end + 1
        end = accept_run(end, digits)
        if src.startswith(".", end):
            end = accept_run(end + 1, digits)
        exponent = _EXPONENT_MARKS.get(digits, "")
        if exponent and end < len(src) and src[end] in exponent:
            end += 1
            if end < len(src) and src[end] in "+-":
                end += 1
            end = accept_run(end, "0123456789_")
        if src.startswith("i", end):
            end += 1
        if end < len(src) and _is_alnum(src[end]):
            raise _LexError(f"bad number syntax: {_go_quote(src[pos : end + 1])}", pos)
        return end

    def _quoted(self, pos: int, quote: str, unterminated: str, kind: str) -> int:
        src = self.src
        end = pos + 1
        while True:
            if end >= len(src) or src[end] == "\n":
                raise _LexError(unterminated, pos)
            char = src[end]
            if char == "\\":
                end += 1
                if end >= len(src) or src[end] == "\n":
                    raise _LexError(unterminated, pos)
            elif char == quote:
                return self._emit(kind, pos, end + 1)
            end += 1

    def _raw_string(self, pos: int) -> int:
        close = self.src.find("`", pos + 1)
        if close < 0:
            raise _LexError("unterminated raw quoted string", pos)
        return self._emit(_RAW_STRING, pos, close + 1)
