"""The one exception family of awf-nb.

Every error a user can cause or meet is an `AwfError`: it carries the process exit code
(spec §9: 1 user error, 2 workflow definition error, 3 execution error, 4 system error)
and a message written for the person who has to fix it. Frontends print `str(err)` and
never a traceback (unless asked with `--debug`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

EXIT_OK = 0
EXIT_USER = 1
EXIT_DEFINITION = 2
EXIT_EXECUTION = 3
EXIT_SYSTEM = 4
EXIT_CANCELLED = 130  # a cancelled run (Ctrl-C, Stop): asyncio's cancellation, no AwfError


class AwfError(Exception):
    """Base of every error awf-nb raises on purpose."""

    exit_code: int = EXIT_SYSTEM

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class UserError(AwfError):
    """Bad input from the user: a missing file, an unknown run id, a bad flag value."""

    exit_code = EXIT_USER


@dataclass(frozen=True)
class Problem:
    """One validation finding, with where it is.

    `path` is the YAML path of the offending key (`states.review.conversation.max_turns`);
    `line`/`column` are 1-based (0 when unknown).
    """

    message: str
    path: str = ""
    file: str = ""
    line: int = 0
    column: int = 0
    severity: Literal["error", "warning"] = "error"
    hint: str | None = field(default=None, compare=False)

    def location(self) -> str:
        parts = [self.file or "<workflow>"]
        if self.line:
            parts.append(str(self.line))
            if self.column:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        where = self.location()
        text = f"{where}: {self.severity}: "
        if self.path and not self.message.startswith(self.path):
            text += f"{self.path}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "hint": self.hint,
        }


class DefinitionError(AwfError):
    """The workflow file is invalid. Holds every problem found, not just the first.

    Its message lists them all, in file order, warnings too, as `awf validate` does: a
    warning often says why there is an error (`promt:` is an unknown key, did you mean
    `prompt`? — and so the prompt is missing)."""

    exit_code = EXIT_DEFINITION

    def __init__(self, problems: list[Problem] | str, *, hint: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        self.problems = list(problems)
        # The workflow, when it was built but failed its checks: `awf validate` still runs
        # its later checks (providers, roles, skills) on it, so every problem shows at once.
        self.partial: Any = None
        shown = sorted(self.problems, key=lambda p: (p.file, p.line, p.column))
        super().__init__("\n".join(str(p) for p in shown), hint=hint)


class InputError(UserError):
    """Workflow inputs are missing or invalid; `problems` lists every one."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid inputs:\n  " + "\n  ".join(self.problems))


class ExecutionError(AwfError):
    """A step failed while the workflow ran (a command, a template, a route)."""

    exit_code = EXIT_EXECUTION

    def __init__(self, message: str, *, step: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.step = step


class ProviderError(ExecutionError):
    """An agent provider failed: unreachable server, HTTP error, bad stream, CLI failure.

    `retryable` tells the engine a retry may help (429, 5xx, connection errors) — it still
    only retries when nothing has been streamed yet.
    """

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        exit_code: int | None = None,
        hint: str | None = None,
        prefixed: bool = True,
    ) -> None:
        # `prefixed=False` for messages that already name the provider in their own words.
        super().__init__(f"{provider}: {message}" if prefixed else message, hint=hint)
        self.provider = provider
        self.retryable = retryable
        self.retry_after = retry_after
        if exit_code is not None:
            self.exit_code = exit_code


class AwfSystemError(AwfError):
    """The machine failed us: disk full, storage unreadable, a missing dependency."""

    exit_code = EXIT_SYSTEM


def internal_error(exc: BaseException) -> str:
    """How an exception that is not an `AwfError` (a bug in awf-nb) is reported: one line
    naming it. The CLI adds how to see its traceback (`--debug`)."""
    return f"internal error: {type(exc).__name__}: {exc}"
