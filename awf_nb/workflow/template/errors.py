"""The errors a template raises, and where in its source a problem is.

`TemplateSyntaxError` comes from parsing, `TemplateRenderError` from rendering; both are
`TemplateError`s. `_CallError` is how a template function reports a failure to the renderer,
which turns it into a `TemplateRenderError` that says where the call is.
"""

from __future__ import annotations

import functools
from typing import Any


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
        rebuild = functools.partial(
            type(self),
            name=self.name,
            field=self.field,
            line=self.line,
            column=self.column,
            snippet=self._snippet,
        )
        return (rebuild, (self.reason,))


class _CallError(Exception):
    """A function failed; rendered as `error calling NAME: message` (or bare)."""

    def __init__(self, message: str, *, bare: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.bare = bare


def _line_col(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1
