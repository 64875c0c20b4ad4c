"""What `awf validate` asks of the run set-up without loading the engine: the problems a run
would refuse to start with, found from the workflow alone (its providers and their options).

`runs/setup.py` imports the engine, providers and store to put a run together; validating a
file needs none of that, and a linter-fast `awf validate` must not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awf_nb.errors import Problem
    from awf_nb.workflow.model import Workflow


def provider_problems(workflow: Workflow) -> list[Problem]:
    """Unknown provider names and bad provider options in `workflow`, as located problems
    (what `awf validate` reports and a run refuses to start with)."""
    from awf_nb.providers import provider_problems as problems

    return problems(workflow)
