"""The values of Go literals in templates: quoted and raw strings, characters, numbers."""

from __future__ import annotations

import math

from awf_nb.workflow.template.values import _go_quote

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
