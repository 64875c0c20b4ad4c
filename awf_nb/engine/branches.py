"""Which parallel step's branch the current task runs.

Set by the parallel step for each branch's task (its loops and called workflows included:
they run in that task's context); read by the conversation partner, which refuses to ask
the person for a message inside a branch (the person can answer one conversation at a
time). A module of its own so that both import it from below.
"""

from __future__ import annotations

import contextvars

# the parallel step's name, "" outside of any
in_parallel_branch: contextvars.ContextVar[str] = contextvars.ContextVar(
    "in_parallel_branch", default=""
)
