"""Go values in templates: truth, type names, `%v` printing, float and string quoting, JSON.

Everything here follows Go's `fmt`, `strconv` and `encoding/json`, so a template prints
`[a b]`, `map[k:v]`, `3` for a float64 3 and `1.234567e+06` exactly as AWF would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from awf_nb.workflow.template.errors import _CallError

_MISSING: Any = object()  # "no value piped in" (Go's missingVal)


def _truth(value: Any) -> bool:
    """Go's notion of a true value: non-empty, non-zero, non-nil."""
    if value is None:
        return False
    if isinstance(value, bool | int | float | str | list | tuple | Mapping):
        return bool(value)
    return True


# The kinds of value templates deal in, tested in this order (a bool is also an int).
_KIND_CLASSES: tuple[tuple[Any, str], ...] = (
    (bool, "bool"),
    (int, "int"),
    (float, "float"),
    (str, "string"),
    (list | tuple, "list"),
    (Mapping, "map"),
)
# How fmt names those kinds (`%T`, `%!d(string=x)`) where it differs from the kind.
_GO_TYPE_NAMES = {
    "nil": "<nil>",
    "float": "float64",
    "list": "[]interface {}",
    "map": "map[string]interface {}",
}


def _value_kind(value: Any) -> str | None:
    """`nil`, `bool`, `int`, `float`, `string`, `list` or `map`; None for anything else."""
    if value is None:
        return "nil"
    for classes, kind in _KIND_CLASSES:
        if isinstance(value, classes):
            return kind
    return None


def _kind(value: Any) -> str:
    """A friendly type name for error messages."""
    kind = _value_kind(value)
    if kind is None:
        return type(value).__name__
    return "nil value" if kind == "nil" else kind


def _go_type(value: Any) -> str:
    """The Go type name that fmt shows for a value (`%T`, `%!d(string=x)`)."""
    kind = _value_kind(value)
    if kind is None:
        return type(value).__name__
    return _GO_TYPE_NAMES.get(kind, kind)


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
