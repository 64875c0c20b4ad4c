"""What the loader learns about one YAML text (`_Document`: positions, scalars as written,
problems) and how it words values and positions in those problems."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from awf_nb.errors import Problem
from awf_nb.workflow.checks import locate
from awf_nb.workflow.kinds import type_word


@dataclass
class _Document:
    """What we learn about one YAML text: positions, original scalar texts, problems."""

    file: str
    locations: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Source text of scalars that YAML resolved to something other than a string (`1.10`,
    # `yes`): Go's YAML decoder gives a string field the text as written, so we do too.
    scalar_text: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def where(self, path: str) -> tuple[int, int]:
        """Position of `path`, or of its nearest ancestor that exists in the file."""
        return locate(self.locations, path)

    def problem(
        self, message: str, path: str, *, severity: str = "error", hint: str | None = None
    ) -> Problem:
        line, column = self.where(path)
        return Problem(
            message,
            path=path,
            file=self.file,
            line=line,
            column=column,
            severity="warning" if severity == "warning" else "error",
            hint=hint,
        )

    def error(self, message: str, path: str, hint: str | None = None) -> None:
        self.problems.append(self.problem(message, path, hint=hint))

    def warn(self, message: str, path: str, hint: str | None = None) -> None:
        self.problems.append(self.problem(message, path, severity="warning", hint=hint))


def _located(problem: Problem, doc: _Document) -> Problem:
    """Fill in the file and position of a problem reported by `checks` without them."""
    if problem.file and problem.line:
        return problem
    line, column = (problem.line, problem.column) if problem.line else doc.where(problem.path)
    return replace(problem, file=problem.file or doc.file, line=line, column=column)


def _at_mark(doc: _Document, mark: Any, message: str, hint: str | None = None) -> Problem:
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(message, file=doc.file, line=line, column=column, hint=hint)


def go_type(value: Any) -> str:
    """The type word a Go programmer (and AWF's messages) would use for a YAML value."""
    return type_word(value, none="null")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
