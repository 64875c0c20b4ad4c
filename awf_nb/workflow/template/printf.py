"""Go's `fmt.Sprintf` for the verbs templates use, with Go's `%!verb(...)` error marks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from awf_nb.workflow.template.values import (
    _fmt_v,
    _go_float,
    _go_quote,
    _go_type,
    _sorted_keys,
)


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


# A width or precision past this would only build a huge string (printf "%099999999999d").
MAX_WIDTH = 100_000


class WidthTooLarge(ValueError):
    def __init__(self, number: int) -> None:
        super().__init__(f"printf width or precision {number} is larger than {MAX_WIDTH}")


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
        if number > MAX_WIDTH:
            raise WidthTooLarge(number)
        return pos + 1, arg_index + 1, number, ""
    end = pos
    while end < len(fmt) and "0" <= fmt[end] <= "9":
        end += 1
    if end - pos > 6 and int(fmt[pos:end]) > MAX_WIDTH:
        raise WidthTooLarge(int(fmt[pos:end]))
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
