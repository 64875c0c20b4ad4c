"""Go `text/template` for AWF workflows: parse once, render many.

AWF (the Go tool whose workflow files we run) renders every command, prompt, message and
loop field with Go's `text/template` and `missingkey=error`. This module interprets the part
of that language workflows use, the way Go does:

- a lexer and a parser modelled on Go's `text/template/parse` (same tokens, same trim-marker
  rules, same error wording, plus the column);
- a tree-walking renderer with Go's value semantics: truthiness, `%v` printing (`[a b]`,
  `map[k:v]`, `3` for a float64 3), comparisons, `and`/`or` short-circuiting, `printf`;
- AWF's functions (`escape`, `json`, `split`, `join`, `trimSpace`, `readFile`) and its
  dot-less namespace functions (`{{inputs.x}}`, `{{states.s.Output}}`, `{{loop.index1}}`).

`parse(source)` is cached on the source text, so a template used in a loop body or in every
turn of a conversation is tokenised once. `Template.references()` lists the field chains a
template reads from the run data, so `awf validate` can check them without rendering.

Deliberate differences, each a clearer error or a friendlier result: assigning to an
undeclared variable is a parse error (Go fails when rendering); ints and floats compare by
value (Go refuses); printf's float verbs accept ints; `nil` may be passed to any function;
`join` accepts any list (AWF: only strings); `escape` always quotes (AWF leaves plain words
bare); complex number constants are refused.
"""

from __future__ import annotations

import functools
import math
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

__all__ = [
    "MAX_READ_FILE_BYTES",
    "FieldRef",
    "Template",
    "TemplateError",
    "TemplateRenderError",
    "TemplateSyntaxError",
    "parse",
    "render",
]

MAX_READ_FILE_BYTES = 1 << 20  # readFile refuses bigger files, as AWF does
_MAX_CALL_DEPTH = 100  # nested {{template}} calls; stops a template that calls itself
_PARSE_CACHE_SIZE = 1024

# Go's unicode.IsSpace set, for trimSpace and split (Python's str.strip() also strips the
# ASCII separator controls \x1c-\x1f, which Go keeps).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
_ACTION_SPACE = " \t\r\n"  # what Go treats as space inside actions and for trim markers


# --- errors and references ------------------------------------------------------------------


class TemplateError(ValueError):
    """A template that cannot be parsed or rendered; `str(err)` is the complete message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return str(self.args[0])


class TemplateSyntaxError(TemplateError):
    """The template source is not valid; raised by `parse`, before anything is rendered.

    `message` is the bare reason (`unexpected "}" in operand`), `line` and `column` are
    1-based positions in the template source, `name` the template's name. `str(err)` reads
    like Go's parse errors with the column added: `template: prompt:1:12: unexpected "}" in
    operand`.
    """

    def __init__(self, message: str, line: int, column: int, name: str = "template") -> None:
        super().__init__(f"template: {name}:{line}:{column}: {message}")
        self.message = message
        self.reason = message
        self.line = line
        self.column = column
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.line, self.column, self.name))

    def with_name(self, name: str) -> TemplateSyntaxError:
        """The same error, reported for the template called `name`."""
        return TemplateSyntaxError(self.message, self.line, self.column, name)


class TemplateRenderError(TemplateError):
    """Rendering failed: a missing field, a bad argument, a function that failed.

    `message` (= `str(err)`) names the template, the problem and where it is:
    `template "prompt": no field "nope" in .inputs (at <.inputs.nope>, line 1, column 3)`.
    `reason` is the bare cause, `field` the dotted field involved (`inputs.nope`; "" when
    the error is not about a field), `line`/`column` the 1-based position in the source.
    """

    def __init__(
        self,
        reason: str,
        *,
        name: str = "template",
        field: str = "",
        line: int = 0,
        column: int = 0,
        snippet: str = "",
    ) -> None:
        message = f'template "{name}": {reason}'
        if line:
            at = f"at <{snippet}>, " if snippet else ""
            message += f" ({at}line {line}, column {column})"
        super().__init__(message)
        self.reason = reason
        self.name = name
        self.field = field
        self.line = line
        self.column = column
        self._snippet = snippet

    def __reduce__(self) -> tuple[Any, ...]:
        keywords = {
            "name": self.name,
            "field": self.field,
            "line": self.line,
            "column": self.column,
            "snippet": self._snippet,
        }
        return (functools.partial(type(self), **keywords), (self.reason,))


@dataclass(frozen=True)
class FieldRef:
    """A field chain a template reads from the run data, for `awf validate`.

    `path` starts at the data root: `{{.inputs.x}}` and `{{$.inputs.x}}` give
    `("inputs", "x")`; the namespace function `{{inputs.x}}` gives the same path with
    `function_form=True` (its keys are spelled as written, e.g. `("loop", "index1")`).
    `line` and `column` (1-based) point at the start of the chain in the template source.
    """

    path: tuple[str, ...]
    line: int
    column: int
    function_form: bool = False

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def _line_col(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


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


# --- literals ---------------------------------------------------------------------------------

_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
}


def _unquote(text: str) -> str:
    """The value of a Go string literal ("..." with escapes, or `raw`); ValueError if bad."""
    if text.startswith("`"):
        return text[1:-1].replace("\r", "")
    body = text[1:-1]
    out = bytearray()
    pos = 0
    while pos < len(body):
        char = body[pos]
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            pos += 1
            continue
        value, pos = _unescape(body, pos, '"')
        out += value
    return out.decode("utf-8", "replace")


def _unescape(body: str, pos: int, quote: str) -> tuple[bytes, int]:
    """Decode the escape sequence at body[pos] (a backslash); returns its bytes."""
    kind = body[pos + 1]
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind].encode(), pos + 2
    if kind == quote:
        return kind.encode(), pos + 2
    if kind in "xuU":
        width = {"x": 2, "u": 4, "U": 8}[kind]
        digits = body[pos + 2 : pos + 2 + width]
        if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise ValueError(f"invalid escape \\{kind}{digits} in string")
        code = int(digits, 16)
        if kind == "x":
            return bytes([code]), pos + 2 + width
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"invalid escape \\{kind}{digits}: not a Unicode code point")
        return chr(code).encode(), pos + 2 + width
    if kind in "01234567":
        digits = body[pos + 1 : pos + 4]
        if len(digits) != 3 or not all(c in "01234567" for c in digits) or int(digits, 8) > 255:
            raise ValueError(f"invalid octal escape \\{digits} in string")
        return bytes([int(digits, 8)]), pos + 4
    raise ValueError(f"invalid escape \\{kind} in string")


def _char_value(text: str) -> int:
    """The code point of a Go character constant like 'a' or '\\n'."""
    body = text[1:-1]
    if body.startswith("\\") and len(body) > 1:
        value, end = _unescape(body, 0, "'")
        if end != len(body):
            raise ValueError(f"malformed character constant: {text}")
        return value[0] if body[1] == "x" or body[1] in "01234567" else ord(value.decode())
    if len(body) != 1:
        raise ValueError(f"malformed character constant: {text}")
    return ord(body)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _number_value(text: str) -> int | float:
    """The value of a Go number literal: an int unless it has a fraction or exponent."""
    if text.endswith("i"):
        raise ValueError(f"complex number constants are not supported: {_go_quote(text)}")
    digits = text.lstrip("+-")
    is_hex = digits[:2] in ("0x", "0X")
    if ("p" in digits or "P" in digits) if is_hex else any(c in digits for c in ".eE"):
        return _float_literal(text, is_hex)
    if len(digits) > 80:  # far beyond int64; also keeps int() away from huge strings
        raise ValueError(f"integer overflow: {_go_quote(text)}")
    try:
        if len(digits) > 1 and digits[0] == "0" and digits[1] in "0123456789_":
            value = int(text.replace("0", "0o", 1), 0)  # a leading 0 means octal in Go
        else:
            value = int(text, 0)
    except ValueError:
        raise ValueError(f"illegal number syntax: {_go_quote(text)}") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"integer overflow: {_go_quote(text)}")
    return value


def _float_literal(text: str, is_hex: bool) -> float:
    # float() checks underscores the way Go does (only between digits); fromhex takes none
    if is_hex and ("__" in text or "_p" in text.lower() or "_." in text or "._" in text):
        raise ValueError(f"illegal number syntax: {_go_quote(text)}")
    try:
        value = float.fromhex(text.replace("_", "")) if is_hex else float(text)
    except (ValueError, OverflowError):
        raise ValueError(f"illegal number syntax: {_go_quote(text)}") from None
    if math.isinf(value):
        raise ValueError(f"number out of range: {_go_quote(text)}")
    return value


# --- syntax tree ------------------------------------------------------------------------------
# Two families: statements (text, actions, control structures) that write output, and
# operands (fields, variables, literals, calls) that produce values. Each node evaluates
# itself: a Python method call per node keeps rendering well under a millisecond.

_MISSING: Any = object()  # "no value piped in" (Go's missingVal)


class _Operand(ABC):
    __slots__ = ("end", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    @abstractmethod
    def value(self, st: _Exec, dot: Any) -> Any:
        """The operand's value when it is an argument."""

    def run(self, st: _Exec, dot: Any, cmd: _Command, final: Any) -> Any:
        """The operand's value when it is the first word of a command."""
        if len(cmd.args) > 1 or final is not _MISSING:
            st.fail(f"can't give argument to non-function {st.text(self)}", cmd)
        return self.value(st, dot)


class _Literal(_Operand):
    __slots__ = ("literal",)

    def __init__(self, start: int, end: int, literal: Any) -> None:
        super().__init__(start, end)
        self.literal = literal

    def value(self, st: _Exec, dot: Any) -> Any:
        return self.literal


class _Nil(_Operand):
    __slots__ = ()

    def value(self, st: _Exec, dot: Any) -> Any:
        return None

    def run(self, st: _Exec, dot: Any, cmd: _Command, final: Any) -> Any:
        st.fail("nil is not a command", cmd)


class _Dot(_Operand):
    __slots__ = ()

    def value(self, st: _Exec, dot: Any) -> Any:
        return dot


class _ChainOperand(_Operand):
    """An operand followed by `.field` lookups: `.a.b`, `$x.a`, `inputs.x`, `(pipe).a`."""

    __slots__ = ("path",)
    path: tuple[str, ...]

    def lookup(self, st: _Exec, value: Any) -> Any:
        for index, key in enumerate(self.path):
            if type(value) is dict and key in value:
                value = value[key]
            else:
                value = _field_slow(st, self, value, index)
        return value

    @abstractmethod
    def base_text(self, st: _Exec) -> str:
        """How the start of the chain is written: `.`, `$x`, `inputs`, `(...)`."""

    def chain_text(self, st: _Exec, length: int) -> str:
        """The chain written up to its first `length` fields (`.inputs` for `.inputs.x`)."""
        base = self.base_text(st)
        fields = "".join("." + key for key in self.path[:length])
        if base == ".":
            return fields or "."
        return base + fields

    def field_name(self, st: _Exec) -> str:
        return self.chain_text(st, len(self.path)).removeprefix(".")


class _Field(_ChainOperand):
    __slots__ = ()

    def __init__(self, start: int, end: int, path: tuple[str, ...]) -> None:
        super().__init__(start, end)
        self.path = path

    def base_text(self, st: _Exec) -> str:
        return "."

    def value(self, st: _Exec, dot: Any) -> Any:
        return self.lookup(st, dot)


class _Variable(_ChainOperand):
    __slots__ = ("name",)

    def __init__(self, start: int, end: int, name: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(start, end)
        self.name = name
        self.path = path

    def base_text(self, st: _Exec) -> str:
        return self.name

    def field_name(self, st: _Exec) -> str:
        if self.name == "$":  # `$` is the data root: `$.inputs.x` reads `inputs.x`
            return ".".join(self.path)
        return super().field_name(st)

    def value(self, st: _Exec, dot: Any) -> Any:
        return self.lookup(st, st.variable(self.name, self))


class _Identifier(_Operand):
    """A function name: called with the command's arguments, or with none as an argument."""

    __slots__ = ("function", "name")

    def __init__(self, start: int, end: int, name: str) -> None:
        super().__init__(start, end)
        self.name = name
        self.function = _FUNCTIONS[name]

    def value(self, st: _Exec, dot: Any) -> Any:
        return self.function.call(st, dot, self, (), _MISSING, self)

    def run(self, st: _Exec, dot: Any, cmd: _Command, final: Any) -> Any:
        return self.function.call(st, dot, self, cmd.args[1:], final, cmd)


class _SubPipe(_Operand):
    """A parenthesised pipeline used as an operand: `(index .x 1)`."""

    __slots__ = ("pipe",)

    def __init__(self, start: int, end: int, pipe: _Pipe) -> None:
        super().__init__(start, end)
        self.pipe = pipe

    def value(self, st: _Exec, dot: Any) -> Any:
        return self.pipe.eval(st, dot)


class _Chain(_ChainOperand):
    """Fields looked up on a function result or a parenthesised pipeline."""

    __slots__ = ("base",)

    def __init__(self, start: int, end: int, base: _Operand, path: tuple[str, ...]) -> None:
        super().__init__(start, end)
        self.base = base
        self.path = path

    def base_text(self, st: _Exec) -> str:
        return st.text(self.base)

    def value(self, st: _Exec, dot: Any) -> Any:
        base = self.base
        if isinstance(base, _Identifier) and base.name in _NAMESPACES:
            return self.lookup(st, st.namespace(base.name, self))
        return self.lookup(st, base.value(st, dot))


class _Command:
    """One stage of a pipeline: a function call or a single value."""

    __slots__ = ("args", "end", "start")

    def __init__(self, args: list[_Operand]) -> None:
        self.args = args
        self.start = args[0].start
        self.end = args[-1].end

    def eval(self, st: _Exec, dot: Any, final: Any) -> Any:
        return self.args[0].run(st, dot, self, final)


class _Pipe:
    """`$x := a | f b`: commands whose results feed the next, and optional variables."""

    __slots__ = ("cmds", "decl", "is_assign")

    def __init__(self, decl: list[_Variable], is_assign: bool, cmds: list[_Command]) -> None:
        self.decl = tuple(v.name for v in decl)
        self.is_assign = is_assign
        self.cmds = cmds

    def eval(self, st: _Exec, dot: Any) -> Any:
        value = _MISSING
        for cmd in self.cmds:
            value = cmd.eval(st, dot, value)
        if self.decl:
            if self.is_assign:
                for name in self.decl:
                    st.assign(name, value, self.cmds[0])
            else:
                for name in self.decl:
                    st.vars.append([name, value])
        return value


class _Statement(ABC):
    __slots__ = ()

    @abstractmethod
    def render(self, st: _Exec, dot: Any) -> None:
        """Write this node's output for the given dot."""


class _Text(_Statement):
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def render(self, st: _Exec, dot: Any) -> None:
        st.out.append(self.text)


class _Action(_Statement):
    __slots__ = ("pipe",)

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def render(self, st: _Exec, dot: Any) -> None:
        value = self.pipe.eval(st, dot)
        if not self.pipe.decl:
            st.out.append(value if type(value) is str else _print_value(value))


class _Control(_Statement):
    """if / with / range: a pipeline, a body, and an optional else body."""

    __slots__ = ("body", "else_body", "pipe")

    def __init__(
        self, pipe: _Pipe, body: list[_Statement], else_body: list[_Statement] | None
    ) -> None:
        self.pipe = pipe
        self.body = body
        self.else_body = else_body


class _If(_Control):
    __slots__ = ()

    def render(self, st: _Exec, dot: Any) -> None:
        mark = len(st.vars)
        if _truth(self.pipe.eval(st, dot)):
            st.walk(self.body, dot)
        elif self.else_body is not None:
            st.walk(self.else_body, dot)
        del st.vars[mark:]


class _With(_Control):
    __slots__ = ()

    def render(self, st: _Exec, dot: Any) -> None:
        mark = len(st.vars)
        value = self.pipe.eval(st, dot)
        if _truth(value):
            st.walk(self.body, value)
        elif self.else_body is not None:
            st.walk(self.else_body, dot)
        del st.vars[mark:]


class _BreakSignal(Exception):
    pass


class _ContinueSignal(Exception):
    pass


class _Range(_Control):
    __slots__ = ()

    def render(self, st: _Exec, dot: Any) -> None:
        mark = len(st.vars)
        collection = self.pipe.eval(st, dot)
        body_mark = len(st.vars)
        ran = False
        for index, elem in self._items(st, collection):
            ran = True
            self._bind(st, body_mark, index, elem)
            try:
                st.walk(self.body, elem)
            except _ContinueSignal:
                pass
            except _BreakSignal:
                break
            finally:
                del st.vars[body_mark:]
        if not ran and self.else_body is not None:
            st.walk(self.else_body, dot)
        del st.vars[mark:]

    def _items(self, st: _Exec, collection: Any) -> Iterator[tuple[Any, Any]]:
        if isinstance(collection, list | tuple):
            return enumerate(collection)
        if isinstance(collection, Mapping):
            return ((key, collection[key]) for key in _sorted_keys(collection))
        if isinstance(collection, int) and not isinstance(collection, bool):
            if len(self.pipe.decl) > 1:
                st.fail(
                    f"can't use {collection} to iterate over more than one variable",
                    self.pipe.cmds[0],
                )
            return ((i, i) for i in range(collection))
        if collection is None:  # Go: a nil value ranges zero times
            return iter(())
        st.fail(
            f"range can't iterate over {_fmt_v(collection)} (a {_kind(collection)})",
            self.pipe.cmds[0],
        )

    def _bind(self, st: _Exec, body_mark: int, index: Any, elem: Any) -> None:
        decl = self.pipe.decl
        if not decl:
            return
        if self.pipe.is_assign:
            if len(decl) > 1:
                st.assign(decl[0], index, self.pipe.cmds[0])
                st.assign(decl[1], elem, self.pipe.cmds[0])
            else:
                st.assign(decl[0], elem, self.pipe.cmds[0])
            return
        st.vars[body_mark - 1][1] = elem  # the last declared variable gets the element
        if len(decl) > 1:
            st.vars[body_mark - 2][1] = index


class _Break(_Statement):
    __slots__ = ()

    def render(self, st: _Exec, dot: Any) -> None:
        raise _BreakSignal


class _Continue(_Statement):
    __slots__ = ()

    def render(self, st: _Exec, dot: Any) -> None:
        raise _ContinueSignal


class _TemplateCall(_Statement):
    """`{{template "name" pipeline}}` (and the call half of `{{block}}`)."""

    __slots__ = ("end", "name", "pipe", "start")

    def __init__(self, name: str, pipe: _Pipe | None, start: int, end: int) -> None:
        self.name = name
        self.pipe = pipe
        self.start = start
        self.end = end

    def render(self, st: _Exec, dot: Any) -> None:
        body = st.defines.get(self.name)
        if body is None:
            st.fail(f"no template {_go_quote(self.name)} defined", self)
        value = self.pipe.eval(st, dot) if self.pipe is not None else None
        if st.depth >= _MAX_CALL_DEPTH:
            st.fail(f"exceeded maximum template depth ({_MAX_CALL_DEPTH})", self)
        outer_vars = st.vars
        st.vars = [["$", value]]
        st.depth += 1
        try:
            st.walk(body, value)
        finally:
            st.vars = outer_vars
            st.depth -= 1


class _End(NamedTuple):
    pos: int

    def __str__(self) -> str:
        return "{{end}}"


class _Else(NamedTuple):
    pos: int

    def __str__(self) -> str:
        return "{{else}}"


# --- parser -----------------------------------------------------------------------------------


class _ParseError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _is_empty_tree(nodes: list[_Statement]) -> bool:
    return all(isinstance(n, _Text) and not n.text.strip() for n in nodes)


class _Parser:
    """Builds the syntax tree from tokens, following Go's `text/template/parse`."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.tokens = _Lexer(source).run()
        self.i = 0
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.defines: dict[str, list[_Statement]] = {}
        self.keyword_parsers: dict[str, Callable[[_Token], _Statement | _End | _Else]] = {
            "block": self.block_clause,
            "break": self.break_clause,
            "continue": self.break_clause,
            "else": self.else_clause,
            "end": self.end_clause,
            "if": self.if_clause,
            "range": self.range_clause,
            "template": self.template_clause,
            "with": self.with_clause,
        }

    # token access ------------------------------------------------------------------------
    def next(self) -> _Token:
        token = self.peek()
        if token.kind != _EOF:
            self.i += 1
        return token

    def peek(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind == _ERROR:
            raise _ParseError(token.text, token.pos)
        return token

    def backup(self) -> None:
        self.i -= 1

    def peek_non_space(self) -> _Token:
        while self.peek().kind == _SPACE:
            self.i += 1
        return self.peek()

    def next_non_space(self) -> _Token:
        self.peek_non_space()
        return self.next()

    def expect(self, kind: str, context: str) -> _Token:
        token = self.next_non_space()
        if token.kind != kind:
            self.unexpected(token, context)
        return token

    def unexpected(self, token: _Token, context: str) -> NoReturn:
        raise _ParseError(f"unexpected {token.describe()} in {context}", token.pos)

    # structure -----------------------------------------------------------------------------
    def parse(self) -> list[_Statement]:
        root: list[_Statement] = []
        while self.peek().kind != _EOF:
            if self.peek().kind == _LEFT:
                saved = self.i
                self.next()
                if self.next_non_space().kind == "define":
                    self.define_clause()
                    continue
                self.i = saved
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                raise _ParseError(f"unexpected {node}", node.pos)
            root.append(node)
        return root

    def text_or_action(self) -> _Statement | _End | _Else:
        token = self.next_non_space()
        if token.kind == _TEXT:
            return _Text(token.text)
        if token.kind == _LEFT:
            return self.action()
        self.unexpected(token, "input")

    def item_list(self) -> tuple[list[_Statement], _End | _Else]:
        nodes: list[_Statement] = []
        while self.peek_non_space().kind != _EOF:
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                return nodes, node
            nodes.append(node)
        raise _ParseError("unexpected EOF", len(self.src))

    def action(self) -> _Statement | _End | _Else:
        token = self.next_non_space()
        parser = self.keyword_parsers.get(token.kind)
        if parser is not None:
            return parser(token)
        self.backup()
        return _Action(self.pipeline("command", _RIGHT))

    def control(self, context: str) -> tuple[_Pipe, list[_Statement], list[_Statement] | None]:
        saved_vars = len(self.vars)
        pipe = self.pipeline(context, _RIGHT)
        if context == "range":
            self.range_depth += 1
        body, ending = self.item_list()
        if context == "range":
            self.range_depth -= 1
        else_body = None
        if isinstance(ending, _Else):
            # "{{else if x}}" / "{{else with x}}" mean "{{else}}{{if x}}...{{end}}{{end}}"
            # with the inner end shared.
            if context in ("if", "with") and self.peek().kind == context:
                token = self.next()
                nested = self.if_clause(token) if context == "if" else self.with_clause(token)
                else_body = [nested]
            else:
                else_body, ending = self.item_list()
                if not isinstance(ending, _End):
                    raise _ParseError(f"expected end; found {ending}", ending.pos)
        del self.vars[saved_vars:]
        return pipe, body, else_body

    def if_clause(self, token: _Token) -> _Statement:
        return _If(*self.control("if"))

    def with_clause(self, token: _Token) -> _Statement:
        return _With(*self.control("with"))

    def range_clause(self, token: _Token) -> _Statement:
        return _Range(*self.control("range"))

    def else_clause(self, token: _Token) -> _Else:
        following = self.peek_non_space()
        if following.kind not in ("if", "with"):  # else if/with: left pending for control()
            self.expect(_RIGHT, "else")
        return _Else(token.pos)

    def end_clause(self, token: _Token) -> _End:
        self.expect(_RIGHT, "end")
        return _End(token.pos)

    def break_clause(self, token: _Token) -> _Statement:
        following = self.next_non_space()
        if following.kind != _RIGHT:
            self.unexpected(following, "{{" + token.text + "}}")
        if self.range_depth == 0:
            raise _ParseError(f"{{{{{token.text}}}}} outside {{{{range}}}}", token.pos)
        return _Break() if token.text == "break" else _Continue()

    def template_name(self, token: _Token, context: str) -> str:
        if token.kind not in (_STRING, _RAW_STRING):
            self.unexpected(token, context)
        try:
            return _unquote(token.text)
        except ValueError as err:
            raise _ParseError(str(err), token.pos) from None

    def template_clause(self, token: _Token) -> _Statement:
        context = "template clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = None
        if self.next_non_space().kind != _RIGHT:
            self.backup()
            pipe = self.pipeline(context, _RIGHT)
        return _TemplateCall(name, pipe, token.pos, self.tokens[self.i - 1].end)

    def block_clause(self, token: _Token) -> _Statement:
        context = "block clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = self.pipeline(context, _RIGHT)
        end = self.tokens[self.i - 1].end
        self.add_define(name, self.template_body(context), name_token.pos)
        return _TemplateCall(name, pipe, token.pos, end)

    def define_clause(self) -> None:
        context = "define clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        self.expect(_RIGHT, context)
        self.add_define(name, self.template_body(context), name_token.pos)

    def template_body(self, context: str) -> list[_Statement]:
        # A named template has its own `$` and variables, and is outside any range.
        outer_vars, outer_depth = self.vars, self.range_depth
        self.vars, self.range_depth = ["$"], 0
        body, ending = self.item_list()
        if not isinstance(ending, _End):
            raise _ParseError(f"unexpected {ending} in {context}", ending.pos)
        self.vars, self.range_depth = outer_vars, outer_depth
        return body

    def add_define(self, name: str, body: list[_Statement], pos: int) -> None:
        existing = self.defines.get(name)
        if existing is not None and not _is_empty_tree(existing):
            if not _is_empty_tree(body):
                raise _ParseError(f"multiple definition of template {_go_quote(name)}", pos)
            return
        self.defines[name] = body

    # pipelines -----------------------------------------------------------------------------
    def pipeline(self, context: str, end_kind: str) -> _Pipe:
        decl: list[_Variable] = []
        is_assign = self.declarations(context, decl)
        cmds: list[_Command] = []
        while True:
            token = self.next_non_space()
            if token.kind == end_kind:
                self.check_pipeline(cmds, context, token)
                return _Pipe(decl, is_assign, cmds)
            if token.kind not in _OPERAND_START:
                self.unexpected(token, context)
            self.backup()
            cmds.append(self.command())

    def declarations(self, context: str, decl: list[_Variable]) -> bool:
        """Parse `$x :=`, `$x =` or (in range) `$i, $v :=`; True for an assignment."""
        while self.peek_non_space().kind == _VARIABLE:
            var_index = self.i
            var = self.next()
            following = self.peek_non_space()
            if following.kind in (_ASSIGN, _DECLARE):
                self.next()
                decl.append(_Variable(var.pos, var.end, var.text))
                is_assign = following.kind == _ASSIGN
                for variable in decl:
                    if is_assign and variable.name not in self.vars:
                        raise _ParseError(
                            f"undefined variable {_go_quote(variable.name)}", variable.start
                        )
                if not is_assign:
                    self.vars.extend(v.name for v in decl)
                return is_assign
            if following.kind == _CHAR and following.text == ",":
                self.next()
                decl.append(_Variable(var.pos, var.end, var.text))
                if context == "range" and len(decl) < 2:
                    if self.peek_non_space().kind in (_VARIABLE, _RIGHT, _RPAREN):
                        continue
                    raise _ParseError("range can only initialize variables", following.pos)
                raise _ParseError(f"too many declarations in {context}", following.pos)
            self.i = var_index  # `$x` is an operand, not a declaration
            break
        return False

    def check_pipeline(self, cmds: list[_Command], context: str, end: _Token) -> None:
        if not cmds:
            raise _ParseError(f"missing value for {context}", end.pos)
        for stage, cmd in enumerate(cmds[1:], start=2):
            if isinstance(cmd.args[0], _Literal | _Dot | _Nil):
                raise _ParseError(
                    f"non executable command in pipeline stage {stage}", cmd.args[0].start
                )

    def command(self) -> _Command:
        args: list[_Operand] = []
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                args.append(operand)
            token = self.next()
            if token.kind == _SPACE:
                continue
            if token.kind in (_RIGHT, _RPAREN):
                self.backup()
            elif token.kind != _PIPE:
                self.unexpected(token, "operand")
            break
        if not args:
            raise _ParseError("empty command", self.peek().pos)
        return _Command(args)

    def operand(self) -> _Operand | None:
        node = self.term()
        if node is None or self.peek().kind != _FIELD:
            return node
        fields: list[str] = []
        end = node.end
        while self.peek().kind == _FIELD:
            token = self.next()
            fields.append(token.text[1:])
            end = token.end
        if isinstance(node, _Field):
            return _Field(node.start, end, node.path + tuple(fields))
        if isinstance(node, _Variable):
            return _Variable(node.start, end, node.name, tuple(fields))
        if isinstance(node, _Literal | _Nil | _Dot):
            term = self.src[node.start : node.end]
            raise _ParseError(f"unexpected . after term {_go_quote(term)}", end - 1)
        return _Chain(node.start, end, node, tuple(fields))

    def term(self) -> _Operand | None:
        token = self.next_non_space()
        kind, start, end = token.kind, token.pos, token.end
        if kind == _IDENT:
            if token.text not in _FUNCTIONS:
                raise _ParseError(f"function {_go_quote(token.text)} not defined", start)
            return _Identifier(start, end, token.text)
        if kind == _DOT:
            return _Dot(start, end)
        if kind == _NIL:
            return _Nil(start, end)
        if kind == _VARIABLE:
            if token.text not in self.vars:
                raise _ParseError(f"undefined variable {_go_quote(token.text)}", start)
            return _Variable(start, end, token.text)
        if kind == _FIELD:
            return _Field(start, end, (token.text[1:],))
        if kind == _BOOL:
            return _Literal(start, end, token.text == "true")
        if kind in (_NUMBER, _CHAR_CONSTANT, _STRING, _RAW_STRING):
            return _Literal(start, end, self.literal(token))
        if kind == _LPAREN:
            pipe = self.pipeline("parenthesized pipeline", _RPAREN)
            return _SubPipe(start, self.tokens[self.i - 1].end, pipe)
        self.backup()
        return None

    def literal(self, token: _Token) -> Any:
        try:
            if token.kind == _NUMBER:
                return _number_value(token.text)
            if token.kind == _CHAR_CONSTANT:
                return _char_value(token.text)
            return _unquote(token.text)
        except ValueError as err:
            raise _ParseError(str(err), token.pos) from None


# --- references (for awf validate) ------------------------------------------------------------


class _ReferenceCollector:
    """Finds the field chains that read the run data (see `Template.references`).

    `dot_is_root` says whether `.` is the data root where a node sits (range and with
    bodies move it; named templates get their argument), `dollar_is_root` the same for `$`.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[tuple[int, FieldRef]] = []

    def references(self) -> tuple[FieldRef, ...]:
        return tuple(ref for _, ref in sorted(self.found, key=lambda item: item[0]))

    def statements(self, nodes: list[_Statement], dot_is_root: bool, dollar_is_root: bool) -> None:
        for node in nodes:
            if isinstance(node, _Action):
                self.pipe(node.pipe, dot_is_root, dollar_is_root)
            elif isinstance(node, _Control):
                self.pipe(node.pipe, dot_is_root, dollar_is_root)
                body_dot_is_root = dot_is_root and isinstance(node, _If)
                self.statements(node.body, body_dot_is_root, dollar_is_root)
                if node.else_body is not None:  # else runs with the outer dot
                    self.statements(node.else_body, dot_is_root, dollar_is_root)
            elif isinstance(node, _TemplateCall) and node.pipe is not None:
                self.pipe(node.pipe, dot_is_root, dollar_is_root)

    def pipe(self, pipe: _Pipe, dot_is_root: bool, dollar_is_root: bool) -> None:
        for cmd in pipe.cmds:
            for arg in cmd.args:
                self.operand(arg, dot_is_root, dollar_is_root)

    def operand(self, node: _Operand, dot_is_root: bool, dollar_is_root: bool) -> None:
        if isinstance(node, _Field):
            if dot_is_root:
                self.add(node, node.path, function_form=False)
        elif isinstance(node, _Variable):
            if node.name == "$" and node.path and dollar_is_root:
                self.add(node, node.path, function_form=False)
        elif isinstance(node, _Identifier):
            if node.name in _NAMESPACES:
                self.add(node, (node.name,), function_form=True)
        elif isinstance(node, _Chain):
            base = node.base
            if isinstance(base, _Identifier) and base.name in _NAMESPACES:
                self.add(node, (base.name, *node.path), function_form=True)
            else:
                self.operand(base, dot_is_root, dollar_is_root)
        elif isinstance(node, _SubPipe):
            self.pipe(node.pipe, dot_is_root, dollar_is_root)

    def add(self, node: _Operand, path: tuple[str, ...], *, function_form: bool) -> None:
        line, column = _line_col(self.source, node.start)
        self.found.append((node.start, FieldRef(path, line, column, function_form)))


# --- Go values: truth, printing, formatting -------------------------------------------------


def _truth(value: Any) -> bool:
    """Go's notion of a true value: non-empty, non-zero, non-nil."""
    if value is None:
        return False
    if isinstance(value, bool | int | float | str | list | tuple | Mapping):
        return bool(value)
    return True


def _kind(value: Any) -> str:
    """A friendly type name for error messages."""
    if value is None:
        return "nil value"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


def _go_type(value: Any) -> str:
    """The Go type name that fmt shows for a value (`%T`, `%!d(string=x)`)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    return type(value).__name__


def _sorted_keys(mapping: Mapping[Any, Any]) -> list[Any]:
    keys = list(mapping)
    try:
        return sorted(keys)
    except TypeError:  # mixed key types: group by type, as Go's fmtsort does
        return sorted(keys, key=lambda k: (type(k).__name__, str(k)))


def _print_value(value: Any) -> str:
    """How an action prints its value (Go's printValue): nil is `<no value>`."""
    if value is None:
        return "<no value>"
    return _fmt_v(value)


def _fmt_v(value: Any) -> str:
    """Go's `%v`: `true`, `3`, `1e+06`, `[a b]`, `map[k:v]`, `<nil>`."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _go_float(value)
    if value is None:
        return "<nil>"
    if isinstance(value, Mapping):
        items = (f"{_fmt_v(k)}:{_fmt_v(value[k])}" for k in _sorted_keys(value))
        return "map[" + " ".join(items) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(map(_fmt_v, value)) + "]"
    return str(value)


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits that round-trip `value` (>0), and the decimal point
    position: value = 0.DIGITS x 10**point."""
    _sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    point = len(digit_tuple) + exponent - (len(digit_tuple) - len(digits))
    return digits.rstrip("0") or "0", point


def _e_notation(digits: str, point: int, *, min_exp_digits: int = 2) -> str:
    exp = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):0{min_exp_digits}d}"


def _f_notation(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _go_float(value: float) -> str:
    """Go's `%v` for a float64: shortest digits, exponent form below 1e-4 or from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    digits, point = _shortest_digits(abs(value))
    exp = point - 1
    # strconv's shortest %g decides as if the precision were 6, which is why Go templates
    # print a float64 1234567 as 1.234567e+06
    if exp < -4 or exp >= 6:
        return sign + _e_notation(digits, point)
    return sign + _f_notation(digits, point)


def _json_float(value: float) -> str:
    """A float as Go's encoding/json writes it."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value))
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        return sign + _e_notation(digits, point, min_exp_digits=1)
    return sign + _f_notation(digits, point)


_GO_QUOTE_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_quote(text: str, quote: str = '"') -> str:
    """Go's strconv.Quote (or QuoteRune with quote="'")."""
    out = [quote]
    for char in text:
        if char == quote or char == "\\":
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        elif char in _GO_QUOTE_ESCAPES:
            out.append(_GO_QUOTE_ESCAPES[char])
        else:
            code = ord(char)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append(quote)
    return "".join(out)


def _go_json(value: Any) -> str:
    """Go's json.Marshal: sorted keys, no spaces, HTML characters escaped."""
    out: list[str] = []
    _json_encode(value, out, 0)
    return "".join(out)


def _json_string(text: str) -> str:
    import json

    encoded = json.dumps(text, ensure_ascii=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        encoded = encoded.replace(char, escape)
    return encoded


def _json_encode(value: Any, out: list[str], depth: int) -> None:
    if depth > 200:
        raise _CallError("json: value nested too deeply (a cycle?)")
    if isinstance(value, str):
        out.append(_json_string(value))
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _CallError(f"json: unsupported value: {_go_float(value)}")
        out.append(_json_float(value))
    elif isinstance(value, Mapping):
        keyed = sorted((str(k), k) for k in value)
        out.append("{")
        for i, (text, key) in enumerate(keyed):
            if i:
                out.append(",")
            out.append(_json_string(text) + ":")
            _json_encode(value[key], out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _json_encode(item, out, depth + 1)
        out.append("]")
    elif hasattr(value, "isoformat"):  # datetime, date: as Go marshals time.Time
        out.append(_json_string(value.isoformat()))
    else:
        raise _CallError(f"json: unsupported type: {type(value).__name__}")


# --- printf ----------------------------------------------------------------------------------


@dataclass
class _Spec:
    flags: str = ""
    width: int | None = None
    prec: int | None = None


def _sprintf(fmt: str, args: list[Any]) -> str:
    """Go's fmt.Sprintf for the verbs templates use, with Go's `%!verb(...)` error marks."""
    out: list[str] = []
    pos, arg_index, reordered = 0, 0, False
    while pos < len(fmt):
        pct = fmt.find("%", pos)
        if pct < 0:
            out.append(fmt[pos:])
            break
        out.append(fmt[pos:pct])
        spec = _Spec()
        pos = pct + 1
        while pos < len(fmt) and fmt[pos] in "+-# 0":
            spec.flags += fmt[pos]
            pos += 1
        pos, arg_index, bad_index, moved = _arg_index(fmt, pos, arg_index, len(args))
        reordered |= moved
        pos, arg_index, spec.width, error = _width_or_prec(fmt, pos, args, arg_index, spec)
        out.append(error)
        if pos < len(fmt) and fmt[pos] == ".":
            pos, arg_index, bad, moved = _arg_index(fmt, pos + 1, arg_index, len(args))
            bad_index |= bad
            reordered |= moved
            pos, arg_index, prec, error = _width_or_prec(fmt, pos, args, arg_index, None)
            spec.prec = 0 if prec is None and not error else prec
            out.append(error)
        pos, arg_index, bad, moved = _arg_index(fmt, pos, arg_index, len(args))
        bad_index |= bad
        reordered |= moved
        if pos >= len(fmt):
            out.append("%!(NOVERB)")
            break
        verb = fmt[pos]
        pos += 1
        if verb == "%":
            out.append("%")
        elif bad_index:
            out.append(f"%!{verb}(BADINDEX)")
        elif arg_index >= len(args):
            out.append(f"%!{verb}(MISSING)")
        else:
            out.append(_format_arg(args[arg_index], verb, spec))
            arg_index += 1
    if not reordered and arg_index < len(args):
        extra = ", ".join(f"{_go_type(a)}={_fmt_v(a)}" for a in args[arg_index:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _arg_index(fmt: str, pos: int, arg_index: int, count: int) -> tuple[int, int, bool, bool]:
    """Parse an explicit `[n]` argument index: (pos, arg_index, bad index, was given)."""
    if not fmt.startswith("[", pos):
        return pos, arg_index, False, False
    close = fmt.find("]", pos)
    if close < 0:
        return len(fmt), arg_index, True, True
    text = fmt[pos + 1 : close]
    if text.isascii() and text.isdigit() and 1 <= int(text) <= count:
        return close + 1, int(text) - 1, False, True
    return close + 1, arg_index, True, True


def _width_or_prec(
    fmt: str, pos: int, args: list[Any], arg_index: int, spec: _Spec | None
) -> tuple[int, int, int | None, str]:
    """Parse a width (spec given) or precision: digits or `*`. Returns (pos, arg_index,
    number or None, error mark)."""
    if fmt.startswith("*", pos):
        what = "WIDTH" if spec is not None else "PREC"
        if arg_index >= len(args) or type(args[arg_index]) is not int:
            return pos + 1, arg_index + 1, None, f"%!(BAD{what})"
        number = args[arg_index]
        if number < 0:
            if spec is None:
                return pos + 1, arg_index + 1, None, ""
            spec.flags += "-"
            number = -number
        return pos + 1, arg_index + 1, number, ""
    end = pos
    while end < len(fmt) and "0" <= fmt[end] <= "9":
        end += 1
    return end, arg_index, (int(fmt[pos:end]) if end > pos else None), ""


def _format_arg(arg: Any, verb: str, spec: _Spec) -> str:
    if verb == "T":
        return _pad(_go_type(arg), spec)
    body = _format_value(arg, verb, spec)
    if body is None:
        return _bad_verb(verb, arg)
    return _pad(body, spec)


def _bad_verb(verb: str, arg: Any) -> str:
    if arg is None:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({_go_type(arg)}={_fmt_v(arg)})"


def _pad(body: str, spec: _Spec) -> str:
    if spec.width is None or len(body) >= spec.width:
        return body
    return body.ljust(spec.width) if "-" in spec.flags else body.rjust(spec.width)


def _format_value(arg: Any, verb: str, spec: _Spec) -> str | None:
    """Format one argument for a verb; None when the verb does not apply (a bad verb)."""
    if isinstance(arg, Mapping | list | tuple):
        inner = _Spec(flags=spec.flags, prec=spec.prec)

        def element(item: Any) -> str:
            text = _format_value(item, verb, inner)
            return _bad_verb(verb, item) if text is None else text

        if isinstance(arg, Mapping):
            pairs = (f"{element(k)}:{element(arg[k])}" for k in _sorted_keys(arg))
            return "map[" + " ".join(pairs) + "]"
        return "[" + " ".join(map(element, arg)) + "]"
    if arg is None:
        return "<nil>" if verb == "v" else None
    if isinstance(arg, bool):
        return ("true" if arg else "false") if verb in "vt" else None
    if isinstance(arg, int):
        return _format_int(int(arg), verb, spec)
    if isinstance(arg, float):
        return _format_float(arg, verb, spec)
    return _format_str(str(arg), verb, spec)


def _sign(negative: bool, flags: str) -> str:
    if negative:
        return "-"
    return "+" if "+" in flags else " " if " " in flags else ""


def _zero_pad(sign: str, prefix: str, digits: str, spec: _Spec) -> str:
    if "0" in spec.flags and "-" not in spec.flags and spec.width is not None:
        digits = digits.zfill(spec.width - len(sign) - len(prefix))
    return sign + prefix + digits


def _format_int(value: int, verb: str, spec: _Spec) -> str | None:
    if verb in "eEfFgG":
        return _format_float(float(value), verb, spec)
    if verb == "c":
        return _rune(value)
    if verb == "q":
        return _go_quote(_rune(value), "'")
    if verb == "U":
        text = f"U+{value:04X}"
        return text + f" '{_rune(value)}'" if "#" in spec.flags else text
    bases = {"v": ("d", ""), "d": ("d", ""), "b": ("b", "0b"), "o": ("o", "0"),
             "O": ("o", "0o"), "x": ("x", "0x"), "X": ("X", "0X")}  # fmt: skip
    if verb not in bases:
        return None
    code, alternate = bases[verb]
    digits = format(abs(value), code)
    if spec.prec is not None:
        digits = "" if spec.prec == 0 and value == 0 else digits.zfill(spec.prec)
    prefix = alternate if ("#" in spec.flags or verb == "O") else ""
    if spec.prec is not None:  # Go ignores the 0 flag when a precision is given
        return _sign(value < 0, spec.flags) + prefix + digits
    return _zero_pad(_sign(value < 0, spec.flags), prefix, digits, spec)


def _rune(value: int) -> str:
    if 0 <= value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF:
        return chr(value)
    return "\ufffd"


def _format_float(value: float, verb: str, spec: _Spec) -> str | None:
    if verb not in "veEfFgGxX":
        return None
    negative = math.copysign(1.0, value) < 0
    magnitude = abs(value)
    if math.isnan(value) or math.isinf(value):
        text = "NaN" if math.isnan(value) else "Inf"
        sign = "-" if negative and not math.isnan(value) else "+" if "+" in spec.flags else ""
        if text == "Inf" and not sign:
            sign = "+"
        return sign + text
    if verb in "xX":
        text = _hex_float(magnitude)
        text = text.upper().replace("0X", "0X") if verb == "X" else text
    elif verb in "vgG" and spec.prec is None:
        text = _go_float(magnitude)
        text = text.upper() if verb == "G" else text
    else:
        prec = 6 if spec.prec is None else spec.prec
        text = format(magnitude, f".{prec}{verb if verb != 'v' else 'g'}")
    return _zero_pad(_sign(negative, spec.flags), "", text, spec)


def _hex_float(value: float) -> str:
    """Go's %x for a float: 0x1.8p+01."""
    if value == 0:
        return "0x0p+00"
    mantissa, _, exponent = value.hex().partition("p")
    mantissa = mantissa.rstrip("0").rstrip(".")
    exp = int(exponent)
    return f"{mantissa}p{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _format_str(text: str, verb: str, spec: _Spec) -> str | None:
    if spec.prec is not None and verb in "svq":
        text = text[: spec.prec]
    if verb in "sv":
        return text
    if verb == "q":
        if (
            "#" in spec.flags
            and "`" not in text
            and all(c == "\t" or c.isprintable() for c in text)
        ):
            return f"`{text}`"
        return _go_quote(text)
    if verb in "xX":
        data = text.encode("utf-8", "surrogatepass")
        pieces = [format(b, "02X" if verb == "X" else "02x") for b in data]
        prefix = ("0X" if verb == "X" else "0x") if "#" in spec.flags else ""
        if " " in spec.flags:
            return " ".join(prefix + p for p in pieces)
        return prefix + "".join(pieces)
    return None


# --- functions -------------------------------------------------------------------------------


class _CallError(Exception):
    """A function failed; rendered as `error calling NAME: message` (or bare)."""

    def __init__(self, message: str, *, bare: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.bare = bare


class _Function(NamedTuple):
    name: str
    impl: Callable[..., Any]
    min_args: int
    max_args: int | None  # None: variadic
    lazy: bool = False  # and/or get the unevaluated argument nodes

    def call(
        self,
        st: _Exec,
        dot: Any,
        ident: _Identifier,
        arg_nodes: list[_Operand] | tuple[()],
        final: Any,
        where: _Operand | _Command,
    ) -> Any:
        count = len(arg_nodes) + (final is not _MISSING)
        if count < self.min_args or (self.max_args is not None and count > self.max_args):
            want = f"at least {self.min_args}" if self.max_args is None else str(self.min_args)
            st.fail(f"wrong number of args for {self.name}: want {want} got {count}", where)
        try:
            if self.lazy:
                return self.impl(st, dot, arg_nodes, final)
            args = [node.value(st, dot) for node in arg_nodes]
            if final is not _MISSING:
                args.append(final)
            return self.impl(st, args)
        except _CallError as err:
            reason = err.message if err.bare else f"error calling {self.name}: {err.message}"
            st.fail(reason, where)


def _want_string(args: list[Any], index: int) -> str:
    value = args[index]
    if not isinstance(value, str):
        raise _CallError(f"argument {index + 1} must be a string, got {_kind(value)}")
    return value


def _and(st: _Exec, dot: Any, nodes: list[_Operand], final: Any) -> Any:
    value: Any = None
    for node in nodes:
        value = node.value(st, dot)
        if not _truth(value):
            return value
    return final if final is not _MISSING else value


def _or(st: _Exec, dot: Any, nodes: list[_Operand], final: Any) -> Any:
    value: Any = None
    for node in nodes:
        value = node.value(st, dot)
        if _truth(value):
            return value
    return final if final is not _MISSING else value


def _len(st: _Exec, args: list[Any]) -> int:
    item = args[0]
    if isinstance(item, str):  # Go counts bytes
        return len(item.encode("utf-8", "surrogatepass"))
    if isinstance(item, list | tuple | Mapping):
        return len(item)
    if item is None:
        raise _CallError("len of nil pointer")
    raise _CallError(f"len of type {_kind(item)}")


def _index_number(index: Any, length: int, *, inclusive: bool) -> int:
    if index is None:
        raise _CallError("cannot index slice/array with nil")
    if not isinstance(index, int) or isinstance(index, bool):
        raise _CallError(f"cannot index slice/array with type {_kind(index)}")
    if index < 0 or index > length or (index == length and not inclusive):
        raise _CallError(f"index out of range: {index}")
    return int(index)


def _index(st: _Exec, args: list[Any]) -> Any:
    item = args[0]
    if item is None:
        raise _CallError("index of untyped nil")
    for index in args[1:]:
        if isinstance(item, str):
            data = item.encode("utf-8", "surrogatepass")
            item = data[_index_number(index, len(data), inclusive=False)]
        elif isinstance(item, list | tuple):
            item = item[_index_number(index, len(item), inclusive=False)]
        elif isinstance(item, Mapping):
            try:
                item = item.get(index)  # Go gives the zero value for a missing key
            except TypeError:
                raise _CallError(f"cannot use a {_kind(index)} as a map key") from None
        elif item is None:
            raise _CallError("index of nil pointer")
        else:
            raise _CallError(f"can't index item of type {_kind(item)}")
    return item


def _slice(st: _Exec, args: list[Any]) -> Any:
    item, indexes = args[0], args[1:]
    if item is None:
        raise _CallError("slice of untyped nil")
    if len(indexes) > 3:
        raise _CallError(f"too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise _CallError("cannot 3-index slice a string")
        sequence: bytes | list[Any] | tuple[Any, ...] = item.encode("utf-8", "surrogatepass")
    elif isinstance(item, list | tuple):
        sequence = item
    else:
        raise _CallError(f"can't slice item of type {_kind(item)}")
    bounds = [0, len(sequence), len(sequence)]
    for i, index in enumerate(indexes):
        bounds[i] = _index_number(index, len(sequence), inclusive=True)
    if bounds[0] > bounds[1]:
        raise _CallError(f"invalid slice index: {bounds[0]} > {bounds[1]}")
    if len(indexes) == 3 and bounds[1] > bounds[2]:
        raise _CallError(f"invalid slice index: {bounds[1]} > {bounds[2]}")
    part = sequence[bounds[0] : bounds[1]]
    if isinstance(part, bytes):
        return part.decode("utf-8", "replace")
    return list(part)


def _sprint(args: list[Any]) -> str:
    """Go's fmt.Sprint: a space between operands when neither is a string."""
    out: list[str] = []
    previous_is_string = True
    for i, arg in enumerate(args):
        is_string = isinstance(arg, str)
        if i and not is_string and not previous_is_string:
            out.append(" ")
        out.append(_fmt_v(arg))
        previous_is_string = is_string
    return "".join(out)


def _printf(st: _Exec, args: list[Any]) -> str:
    return _sprintf(_want_string(args, 0), args[1:])


def _escaper_text(args: list[Any]) -> str:
    """The text html/js/urlquery escape: one string as is, else Sprint of the values."""
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return _sprint(["<no value>" if a is None else a for a in args])


def _html(st: _Exec, args: list[Any]) -> str:
    text = _escaper_text(args)
    for char, entity in (
        ("&", "&amp;"),
        ("'", "&#39;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ('"', "&#34;"),
        ("\x00", "\ufffd"),
    ):
        text = text.replace(char, entity)
    return text


_JS_ESCAPES = {
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
    "<": "\\u003C",
    ">": "\\u003E",
    "&": "\\u0026",
    "=": "\\u003D",
}


def _js(st: _Exec, args: list[Any]) -> str:
    out: list[str] = []
    for char in _escaper_text(args):
        if char in _JS_ESCAPES:
            out.append(_JS_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        elif char < "\x80" or char.isprintable():
            out.append(char)
        else:
            out.append(f"\\u{ord(char):04X}")
    return "".join(out)


def _urlquery(st: _Exec, args: list[Any]) -> str:
    return urllib.parse.quote_plus(_escaper_text(args), safe="")


_NUMERIC_KINDS = ("int", "float")


def _basic_kind(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return "other"


def _equal(left: Any, right: Any) -> bool:
    left_kind, right_kind = _basic_kind(left), _basic_kind(right)
    if left_kind != right_kind:
        if left_kind in _NUMERIC_KINDS and right_kind in _NUMERIC_KINDS:
            return bool(left == right)
        if "nil" in (left_kind, right_kind):
            return False
        raise _CallError(f"incompatible types for comparison: {_kind(left)} and {_kind(right)}")
    if left_kind == "other":
        raise _CallError(f"non-comparable type {_fmt_v(left)}: {_go_type(left)}")
    return left_kind == "nil" or bool(left == right)


def _eq(st: _Exec, args: list[Any]) -> bool:
    if len(args) < 2:
        raise _CallError("missing argument for comparison")
    return any(_equal(args[0], other) for other in args[1:])


def _ne(st: _Exec, args: list[Any]) -> bool:
    return not _equal(args[0], args[1])


def _less(left: Any, right: Any) -> bool:
    left_kind, right_kind = _basic_kind(left), _basic_kind(right)
    orderable = ("int", "float", "string")
    if left_kind not in orderable or right_kind not in orderable:
        bad = left if left_kind not in orderable else right
        raise _CallError(f"invalid type for comparison: {_kind(bad)}")
    if left_kind != right_kind and not (
        left_kind in _NUMERIC_KINDS and right_kind in _NUMERIC_KINDS
    ):
        raise _CallError(f"incompatible types for comparison: {_kind(left)} and {_kind(right)}")
    return bool(left < right)


def _lt(st: _Exec, args: list[Any]) -> bool:
    return _less(args[0], args[1])


def _le(st: _Exec, args: list[Any]) -> bool:
    return _less(args[0], args[1]) or _equal(args[0], args[1])


def _gt(st: _Exec, args: list[Any]) -> bool:
    return not _le(st, args)


def _ge(st: _Exec, args: list[Any]) -> bool:
    return not _less(args[0], args[1])


def _shell_escape(st: _Exec, args: list[Any]) -> str:
    """POSIX single-quote escaping: `it's` -> 'it'"'"'s'. Always quoted, so the result is
    one shell word whatever the text holds."""
    value = args[0]
    text = value if isinstance(value, str) else _fmt_v(value)
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _split(st: _Exec, args: list[Any]) -> list[str]:
    text, separator = _want_string(args, 0), _want_string(args, 1)
    parts = list(text) if separator == "" else text.split(separator)
    return [part.strip(_GO_SPACE) for part in parts]  # AWF trims every part


def _join(st: _Exec, args: list[Any]) -> str:
    items, separator = args[0], _want_string(args, 1)
    if not isinstance(items, list | tuple):
        raise _CallError(f"argument 1 must be a list, got {_kind(items)}")
    return separator.join(item if isinstance(item, str) else _fmt_v(item) for item in items)


def _trim_space(st: _Exec, args: list[Any]) -> str:
    return _want_string(args, 0).strip(_GO_SPACE)


def _read_file(st: _Exec, args: list[Any]) -> str:
    name = _want_string(args, 0)
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = (st.base_dir or Path.cwd()) / path
    shown = _go_quote(name)
    try:
        if path.is_dir():
            raise _CallError(f"failed to read file {shown}: path is a directory")
        with path.open("rb") as handle:
            data = handle.read(MAX_READ_FILE_BYTES + 1)
    except FileNotFoundError:
        raise _CallError(f"failed to read file {shown}: no such file ({path})") from None
    except OSError as err:
        raise _CallError(f"failed to read file {shown}: {err.strerror or err}") from None
    if len(data) > MAX_READ_FILE_BYTES:
        raise _CallError(f"file {shown} exceeds 1MB size limit")
    return data.decode("utf-8", "replace")


# Namespaces AWF also offers as functions (`{{inputs.x}}` for `{{.inputs.x}}`).
_NAMESPACES = ("inputs", "states", "workflow", "env", "context", "loop", "error", "awf")
# Their function forms spell keys in snake_case: `{{loop.index1}}` is `.loop.Index1`.
_SNAKE_CASE_NAMESPACES = frozenset({"loop", "context", "error"})
_NAMESPACE_HINTS = {
    "loop": "loop data exists only inside a for_each or while body",
    "error": "error data exists only in workflow_error hooks",
}


def _pascal_case(key: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in key.split("_"))


def _snake_case(key: str) -> str:
    out: list[str] = []
    for i, char in enumerate(key):
        if (
            char.isupper()
            and i
            and (
                key[i - 1].islower()
                or key[i - 1].isdigit()
                or (i + 1 < len(key) and key[i + 1].islower())
            )
        ):
            out.append("_")
        out.append(char.lower())
    return "".join(out)


class _SnakeCaseKeys(Mapping[str, Any]):
    """A PascalCase namespace as its function form shows it: `loop.index1` -> `Index1`."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: object) -> Any:
        if not isinstance(key, str):
            raise KeyError(key)
        real = self._real_key(key)
        value = self._data[real]
        if real == "Parent" and isinstance(value, Mapping):  # the enclosing loop
            return _SnakeCaseKeys(value)
        return value

    def _real_key(self, key: str) -> str:
        pascal = _pascal_case(key)
        if pascal in self._data:
            return pascal
        wanted = key.replace("_", "").lower()
        for candidate in self._data:  # `id` -> `ID`, `session_id` -> `SessionID`
            if isinstance(candidate, str) and candidate.replace("_", "").lower() == wanted:
                return candidate
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (_snake_case(k) if isinstance(k, str) else k for k in self._data)

    def __len__(self) -> int:
        return len(self._data)


def _namespace_function(name: str) -> _Function:
    def impl(st: _Exec, args: list[Any]) -> Any:
        value, problem = st.namespace_value(name)
        if problem:
            raise _CallError(problem, bare=True)
        return value

    return _Function(name, impl, 0, 0)


_FUNCTIONS: dict[str, _Function] = {
    f.name: f
    for f in (
        _Function("and", _and, 1, None, lazy=True),
        _Function("or", _or, 1, None, lazy=True),
        _Function("not", lambda st, args: not _truth(args[0]), 1, 1),
        _Function("len", _len, 1, 1),
        _Function("index", _index, 1, None),
        _Function("slice", _slice, 1, None),
        _Function("print", lambda st, args: _sprint(args), 0, None),
        _Function("println", lambda st, args: " ".join(map(_fmt_v, args)) + "\n", 0, None),
        _Function("printf", _printf, 1, None),
        _Function("eq", _eq, 1, None),
        _Function("ne", _ne, 2, 2),
        _Function("lt", _lt, 2, 2),
        _Function("le", _le, 2, 2),
        _Function("gt", _gt, 2, 2),
        _Function("ge", _ge, 2, 2),
        _Function("html", _html, 0, None),
        _Function("js", _js, 0, None),
        _Function("urlquery", _urlquery, 0, None),
        _Function("escape", _shell_escape, 1, 1),
        _Function("json", lambda st, args: _go_json(args[0]), 1, 1),
        _Function("split", _split, 2, 2),
        _Function("join", _join, 2, 2),
        _Function("trimSpace", _trim_space, 1, 1),
        _Function("readFile", _read_file, 1, 1),
        *(_namespace_function(name) for name in _NAMESPACES),
    )
}


def _field_slow(st: _Exec, node: _ChainOperand, value: Any, index: int) -> Any:
    """Field lookup off the fast path: other mappings, and every error."""
    key = node.path[index]
    container = node.chain_text(st, index)
    if isinstance(value, Mapping):
        try:
            return value[key]
        except KeyError:
            pass
        reason = f'no field "{key}" in {container}'
        if container in (".", "$") and key in _NAMESPACE_HINTS:
            reason += f" ({_NAMESPACE_HINTS[key]})"
        st.fail(reason, node, field=node.field_name(st))
    if value is None:
        reason = f'can\'t evaluate field "{key}": {container} is nil'
    else:
        reason = f'can\'t evaluate field "{key}" in type {_kind(value)} ({container})'
    st.fail(reason, node, field=node.field_name(st))


# --- execution ---------------------------------------------------------------------------------


class _Exec:
    """The state of one render: output, variables, and what errors need to say."""

    __slots__ = ("base_dir", "data", "defines", "depth", "name", "out", "source", "vars")

    def __init__(self, template: Template, data: Any, base_dir: Path | None, name: str) -> None:
        self.source = template.source
        self.defines = template._defines
        self.data = data
        self.base_dir = base_dir
        self.name = name
        self.out: list[str] = []
        self.vars: list[list[Any]] = [["$", data]]
        self.depth = 0

    def walk(self, nodes: list[_Statement], dot: Any) -> None:
        for node in nodes:
            node.render(self, dot)

    def variable(self, name: str, node: _Operand) -> Any:
        for entry in reversed(self.vars):
            if entry[0] == name:
                return entry[1]
        self.fail(f"undefined variable: {name}", node)

    def assign(self, name: str, value: Any, node: _Command) -> None:
        for entry in reversed(self.vars):
            if entry[0] == name:
                entry[1] = value
                return
        self.fail(f"undefined variable: {name}", node)

    def namespace_value(self, name: str) -> tuple[Any, str]:
        """A namespace for its function form, or the reason it is not available."""
        data = self.data
        value = data.get(name) if isinstance(data, Mapping) else None
        if value is None:
            hint = _NAMESPACE_HINTS.get(name, "the run did not provide it")
            return None, f"{_go_quote(name)} is not available here: {hint}"
        if name in _SNAKE_CASE_NAMESPACES and isinstance(value, Mapping):
            return _SnakeCaseKeys(value), ""
        return value, ""

    def namespace(self, name: str, node: _ChainOperand) -> Any:
        value, problem = self.namespace_value(name)
        if problem:
            self.fail(problem, node, field=node.field_name(self))
        return value

    def text(self, node: _Operand | _Command | _TemplateCall) -> str:
        return self.source[node.start : node.end]

    def fail(
        self, reason: str, node: _Operand | _Command | _TemplateCall, field: str = ""
    ) -> NoReturn:
        line, column = _line_col(self.source, node.start)
        snippet = " ".join(self.text(node).split())
        if len(snippet) > 60:
            snippet = snippet[:57] + "..."
        raise TemplateRenderError(
            reason, name=self.name, field=field, line=line, column=column, snippet=snippet
        )


# --- public API --------------------------------------------------------------------------------


class Template:
    """A parsed template: render it as often as needed, with different data.

    Get one from `parse()`; instances are shared through its cache, so treat them as
    immutable.
    """

    __slots__ = ("_defines", "_nodes", "_references", "_static", "source")

    def __init__(
        self,
        source: str,
        nodes: list[_Statement],
        defines: dict[str, list[_Statement]],
    ) -> None:
        self.source = source
        self._nodes = nodes
        self._defines = defines
        self._static = "{{" not in source
        collector = _ReferenceCollector(source)
        collector.statements(nodes, dot_is_root=True, dollar_is_root=True)
        for body in defines.values():  # a named template's dot and $ are its argument
            collector.statements(body, dot_is_root=False, dollar_is_root=False)
        self._references = collector.references()

    def __repr__(self) -> str:
        shown = self.source if len(self.source) <= 40 else self.source[:37] + "..."
        return f"Template({shown!r})"

    @property
    def is_static(self) -> bool:
        """True when the source has no actions at all: rendering returns it unchanged."""
        return self._static

    def render(
        self, data: Mapping[str, Any], *, base_dir: Path | None = None, name: str = "template"
    ) -> str:
        """Render with `data` as `.` and `$`; `readFile` paths are relative to `base_dir`
        (default: the working directory). Raises TemplateRenderError."""
        if self._static:
            return self.source
        state = _Exec(self, data, Path(base_dir) if base_dir is not None else None, name)
        try:
            state.walk(self._nodes, data)
        except RecursionError:
            raise TemplateRenderError(
                "data or template nested too deeply to render", name=name
            ) from None
        return "".join(state.out)

    def references(self) -> list[FieldRef]:
        """Every field chain read from the run data, in source order.

        `.x.y` counts where dot is the data root (outside range/with bodies), `$.x.y`
        everywhere in the main template, and the namespace functions (`inputs.x`) always.
        """
        return list(self._references)


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_cached(source: str) -> Template:
    parser = _Parser(source)
    try:
        nodes = parser.parse()
    except _ParseError as err:
        line, column = _line_col(source, err.pos)
        raise TemplateSyntaxError(err.message, line, column) from None
    except RecursionError:
        raise TemplateSyntaxError("template nested too deeply", 1, 1) from None
    return Template(source, nodes, parser.defines)


def parse(source: str, *, name: str = "template") -> Template:
    """Parse a template (cached on the source text). Raises TemplateSyntaxError, whose
    message names the template `name`."""
    if not isinstance(source, str):
        raise TemplateError(f"template {name!r}: expected text, got {type(source).__name__}")
    try:
        return _parse_cached(source)
    except TemplateSyntaxError as err:
        if err.name != name:
            raise err.with_name(name) from None
        raise


def render(
    source: str,
    data: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    name: str = "template",
) -> str:
    """Parse (cached) and render in one call: `parse(source).render(data, ...)`."""
    return parse(source, name=name).render(data, base_dir=base_dir, name=name)
