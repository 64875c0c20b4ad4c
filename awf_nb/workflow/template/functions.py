"""The functions a template can call: Go's builtins (`and`, `index`, `printf`, `eq`, ...) and
AWF's (`escape`, `json`, `split`, `join`, `trimSpace`, `readFile`, the namespace functions).

`_FUNCTIONS` maps each name to a `_Function`, which checks the argument count, evaluates the
arguments (except for the short-circuiting `and`/`or`) and reports failures where the call is.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from awf_nb.workflow.files import MAX_FILE_BYTES, FileTooLarge, read_text_capped
from awf_nb.workflow.template.errors import _CallError
from awf_nb.workflow.template.namespaces import _NAMESPACES
from awf_nb.workflow.template.printf import WidthTooLarge, _sprintf
from awf_nb.workflow.template.values import (
    _MISSING,
    _fmt_v,
    _go_json,
    _go_quote,
    _go_type,
    _kind,
    _truth,
    _value_kind,
)

if TYPE_CHECKING:
    from awf_nb.workflow.template.execute import _Exec
    from awf_nb.workflow.template.nodes import _Command, _Identifier, _Operand

MAX_READ_FILE_BYTES = MAX_FILE_BYTES  # readFile refuses bigger files, as AWF does

# Go's unicode.IsSpace set, for trimSpace and split (Python's str.strip() also strips the
# ASCII separator controls \x1c-\x1f, which Go keeps).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


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
    try:
        return _sprintf(_want_string(args, 0), args[1:])
    except WidthTooLarge as exc:
        raise _CallError(str(exc)) from None


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


_SCALAR_KINDS = frozenset({"nil", "bool", "int", "float", "string"})


def _basic_kind(value: Any) -> str:
    """The kind comparisons go by: a scalar's kind (see `_value_kind`), else "other"."""
    kind = _value_kind(value)
    return kind if kind in _SCALAR_KINDS else "other"


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
        return read_text_capped(path, MAX_READ_FILE_BYTES)
    except IsADirectoryError:
        raise _CallError(f"failed to read file {shown}: path is a directory") from None
    except FileNotFoundError:
        raise _CallError(f"failed to read file {shown}: no such file ({path})") from None
    except FileTooLarge:
        raise _CallError(f"file {shown} exceeds 1MB size limit") from None
    except OSError as err:
        raise _CallError(f"failed to read file {shown}: {err.strerror or err}") from None


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
