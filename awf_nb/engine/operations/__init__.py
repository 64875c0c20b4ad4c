"""Carrying out the built-in operations of `type: operation` steps.

The catalogue (names, inputs, outputs) is the language's: `awf_nb.workflow.operations`.
Here each operation is an async function taking its rendered, type-checked inputs and
returning an `OperationResult`: the outputs (they become the step's `Response`, and its
`Output` as JSON) and, when the operation failed, an error message. A failed operation
keeps its outputs (an HTTP status that was asked to fail the step still shows its body).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from awf_nb.engine.operations.base import (
    Operation,
    OperationContext,
    OperationResult,
    call_operation,
)

__all__ = ["Operation", "OperationContext", "OperationResult", "run_operation"]


def _implementations() -> dict[str, Operation]:
    # here, not at the top: the http and github operations bring httpx, which a run without
    # operations (and `import awf_nb`) never needs
    from awf_nb.engine.operations import github, http, notify

    return {"http.request": http.request, **github.OPERATIONS, "notify.send": notify.send}


async def run_operation(
    name: str, inputs: Mapping[str, Any], context: OperationContext
) -> OperationResult:
    """Check `inputs` against the operation's catalogue entry, then carry it out."""
    return await call_operation(name, _implementations(), inputs, context)
