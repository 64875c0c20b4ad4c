"""What every built-in operation shares: its result, what it may know of the run, its
signature, and the call that checks its inputs against the catalogue first.

A module of its own so that the operations (github, http, notify) and the package's
dispatcher import it, rather than each other."""

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


async def call_operation(
    name: str,
    implementations: Mapping[str, Operation],
    inputs: Mapping[str, Any],
    context: OperationContext,
) -> OperationResult:
    """Check `inputs` against the catalogue entry of `name`, then carry it out with its
    implementation in `implementations`."""
    spec = OPERATIONS.get(name)
    if spec is None or name not in implementations:
        raise ExecutionError(unknown_operation_message(name))
    return await implementations[name](coerce_inputs(spec, inputs), context)
