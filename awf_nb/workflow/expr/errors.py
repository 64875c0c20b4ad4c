"""The errors a condition raises: `ExprSyntaxError` when parsing, `ExprEvalError` when
evaluating; both are `ExprError`, a `ValueError`."""

from __future__ import annotations

from typing import Any


class ExprError(ValueError):
    """Any problem with a condition: its syntax or its evaluation."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ExprSyntaxError(ExprError):
    """The condition cannot be parsed; `column` is 1-based into the expression."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.column))


class ExprEvalError(ExprError):
    """The condition parsed but cannot be evaluated on this data (a type error, / by 0)."""


def _syntax_error(text: str, column: int, hint: str = "") -> ExprSyntaxError:
    message = f"{text} at column {column}"
    return ExprSyntaxError(f"{message} ({hint})" if hint else message, column)
