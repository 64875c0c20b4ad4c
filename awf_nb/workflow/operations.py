"""The built-in operations a `type: operation` step can name, as the language knows them.

This is the catalogue only: each operation's name, what it does, its inputs (type,
required, default) and the outputs it sets. The loader checks steps against it (an unknown
operation or a missing required input is an error before anything runs); the engine's
`awf_nb.engine.operations` package carries them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

InputType = Literal["string", "integer", "boolean", "array", "object"]


@dataclass(frozen=True)
class OperationInput:
    type: InputType
    description: str
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class OperationSpec:
    name: str
    description: str
    inputs: dict[str, OperationInput]
    outputs: tuple[str, ...]
    # Inputs of which at least one must be given (e.g. `body` or `body_file`); none here yet.
    notes: str = field(default="", compare=False)


def _repo() -> OperationInput:
    return OperationInput(
        "string",
        "owner/name; defaults to $GITHUB_REPOSITORY, then the git remote `origin` of the "
        "working directory",
    )


_NUMBER = OperationInput("integer", "issue or pull request number", required=True)

_SPECS = (
    OperationSpec(
        "http.request",
        "Send an HTTP request and capture the response",
        {
            "url": OperationInput("string", "http:// or https:// URL", required=True),
            "method": OperationInput(
                "string", "GET, POST, PUT, PATCH, DELETE or HEAD", required=True
            ),
            "headers": OperationInput("object", "request headers (name: value)"),
            "body": OperationInput("string", "request body, sent as is"),
            "timeout": OperationInput("integer", "seconds before giving up", default=30),
            "retryable_status_codes": OperationInput(
                "array", "status codes that fail the step, so `retry:` can try again"
            ),
        },
        ("status_code", "body", "headers", "body_truncated"),
    ),
    OperationSpec(
        "github.get_issue",
        "Read an issue",
        {"number": _NUMBER, "repo": _repo(), "fields": OperationInput("array", "keep only these")},
        ("number", "title", "body", "state", "labels", "url"),
    ),
    OperationSpec(
        "github.get_pr",
        "Read a pull request",
        {"number": _NUMBER, "repo": _repo(), "fields": OperationInput("array", "keep only these")},
        (
            "number",
            "title",
            "body",
            "state",
            "headRefName",
            "baseRefName",
            "mergeable",
            "mergedAt",
            "labels",
            "url",
        ),
    ),
    OperationSpec(
        "github.create_issue",
        "Open an issue",
        {
            "title": OperationInput("string", "issue title", required=True),
            "body": OperationInput("string", "issue text"),
            "labels": OperationInput("array", "labels to set"),
            "assignees": OperationInput("array", "user names to assign"),
            "repo": _repo(),
        },
        ("number", "url"),
    ),
    OperationSpec(
        "github.create_pr",
        "Open a pull request (or report the open one for the same branch)",
        {
            "title": OperationInput("string", "pull request title", required=True),
            "head": OperationInput("string", "branch with the changes", required=True),
            "base": OperationInput("string", "branch to merge into", required=True),
            "body": OperationInput("string", "pull request text"),
            "draft": OperationInput("boolean", "open as a draft", default=False),
            "repo": _repo(),
        },
        ("number", "url", "already_exists"),
    ),
    OperationSpec(
        "github.add_labels",
        "Add labels to an issue or pull request",
        {
            "number": _NUMBER,
            "labels": OperationInput("array", "labels to add", required=True),
            "repo": _repo(),
        },
        ("labels",),
    ),
    OperationSpec(
        "github.list_comments",
        "List the comments of an issue or pull request",
        {
            "number": _NUMBER,
            "limit": OperationInput("integer", "at most this many (the newest)"),
            "repo": _repo(),
        },
        ("comments", "total"),
    ),
    OperationSpec(
        "github.add_comment",
        "Comment on an issue or pull request",
        {
            "number": _NUMBER,
            "body": OperationInput("string", "comment text", required=True),
            "repo": _repo(),
        },
        ("comment_id", "url"),
    ),
    OperationSpec(
        "github.batch",
        "Run several github operations, a few at a time",
        {
            "operations": OperationInput(
                "array", "each item: {name: github.<operation>, <its inputs>…}", required=True
            ),
            "strategy": OperationInput(
                "string", "all_succeed, any_succeed or best_effort", default="best_effort"
            ),
            "concurrency": OperationInput("integer", "at most this many at once", default=3),
        },
        ("total", "succeeded", "failed", "results"),
    ),
    OperationSpec(
        "notify.send",
        "Send a notification to the desktop or to a webhook",
        {
            "backend": OperationInput("string", "desktop or webhook", required=True),
            "message": OperationInput("string", "notification text", required=True),
            "title": OperationInput("string", "notification title", default="AWF Workflow"),
            "priority": OperationInput("string", "low, default or high", default="default"),
            "webhook_url": OperationInput("string", "where the webhook backend posts"),
        },
        ("backend", "status", "response"),
    ),
)

OPERATIONS: dict[str, OperationSpec] = {spec.name: spec for spec in _SPECS}


def unknown_operation_message(name: str) -> str:
    from awf_nb.workflow.suggest import did_you_mean

    """The error for an operation name that is not in the catalogue."""
    close = did_you_mean(name, OPERATIONS)
    hint = f"{close} " if close else ""
    return f'unknown operation "{name}": {hint}known operations: {", ".join(OPERATIONS)}'


def input_problems(spec: OperationSpec, inputs: dict[str, Any]) -> list[str]:
    """What is wrong with a step's literal inputs: missing required ones, unknown names."""
    from awf_nb.workflow.suggest import did_you_mean

    problems = [
        f'operation {spec.name}: input "{name}" is required'
        for name, item in spec.inputs.items()
        if item.required and name not in inputs
    ]
    for name in inputs:
        if name not in spec.inputs:
            close = did_you_mean(name, spec.inputs)
            hint = f" ({close})" if close else ""
            known = ", ".join(spec.inputs)
            problems.append(
                f'operation {spec.name}: unknown input "{name}"{hint}; its inputs are: {known}'
            )
    return problems
