"""The template syntax tree: statements that write output and operands that produce values.

Each node evaluates itself against the render state (`execute._Exec`), which keeps
rendering a tree walk of plain method calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from awf_nb.workflow.template.functions import _FUNCTIONS
from awf_nb.workflow.template.namespaces import _NAMESPACE_HINTS, _NAMESPACES
from awf_nb.workflow.template.values import (
    _MISSING,
    _fmt_v,
    _go_quote,
    _kind,
    _print_value,
    _sorted_keys,
    _truth,
)

if TYPE_CHECKING:
    from awf_nb.workflow.template.execute import _Exec

_MAX_CALL_DEPTH = 100  # nested {{template}} calls; stops a template that calls itself

# --- syntax tree ------------------------------------------------------------------------------
# Two families: statements (text, actions, control structures) that write output, and
# operands (fields, variables, literals, calls) that produce values. Each node evaluates
# itself: a Python method call per node keeps rendering well under a millisecond.


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
        st.write(self.text, self)


class _Action(_Statement):
    __slots__ = ("pipe",)

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def render(self, st: _Exec, dot: Any) -> None:
        value = self.pipe.eval(st, dot)
        if not self.pipe.decl:
            st.write(value if type(value) is str else _print_value(value), self.pipe.cmds[0])


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
            st.tick(self.pipe.cmds[0])
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
