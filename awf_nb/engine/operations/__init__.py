"""Carrying out the built-in operations of `type: operation` steps.

The catalogue (names, inputs, outputs) is the language's: `awf_nb.workflow.operations`.
Here each operation is an async function taking its rendered, type-checked inputs and
returning an `OperationResult`: the outputs (they become the step's `Response`, and its
`Output` as JSON) and, when the operation failed, an error message. A failed operation
keeps its outputs (an HTTP status that was asked to fail the step still shows its body).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awf_nb.engine.operations.values import coerce_inputs
from awf_nb.errors import ExecutionError
from awf_nb.workflow.operations import OPERATIONS, unknown_operation_message


@dataclass
class OperationResult:
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class OperationContext:
    """What an operation may know of the run it is part of."""

    env: Mapping[str, str]
    cwd: Path
    workflow: str = ""
    run_id: str = ""
    step: str = ""


Operation = Callable[[dict[str, Any], OperationContext], Awaitable[OperationResult]]


def _implementations() -> dict[str, Operation]:
    from awf_nb.engine.operations import github, http, notify

    return {"http.request": http.request, **github.OPERATIONS, "notify.send": notify.send}


async def run_operation(
    name: str, inputs: Mapping[str, Any], context: OperationContext
) -> OperationResult:
    """Check `inputs` against the operation's catalogue entry, then carry it out."""
    spec = OPERATIONS.get(name)
    if spec is None:
        raise ExecutionError(unknown_operation_message(name))
    return await _implementations()[name](coerce_inputs(spec, inputs), context)
