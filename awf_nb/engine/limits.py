"""The run-level budget of `limits:` (max_agent_turns, max_tokens, timeout), and the limits
given on top of a workflow's by whoever starts the run (`stricter`).

Workflows whose agents talk in cycles (writer → reviewer → writer) need an end that does
not depend on the agents agreeing. The counts live in the run's state, so a resumed run
carries on from what it had spent. Reaching a limit ends the run with a message naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from awf_nb.engine.state import RunState
from awf_nb.engine.summary import format_limit
from awf_nb.errors import ExecutionError
from awf_nb.workflow.model import Limits


class RunLimitReached(ExecutionError):
    """A `limits:` value was reached: the run ends here (no `on_failure` route applies)."""


@dataclass(frozen=True)
class CostLimit:
    """The most a run may cost in USD, and how to tell what it has cost so far (an
    evaluation's `limits.max_cost`, priced by its `pricing:`; None: no price known)."""

    max_cost: float
    cost_of: Callable[[RunState], float | None]


class RunBudget:
    """Checks one run's `limits:` (and a `CostLimit`) against what it has spent."""

    def __init__(
        self, limits: Limits, state: RunState, cost_limit: CostLimit | None = None
    ) -> None:
        self.limits = limits
        self.state = state
        self.cost_limit = cost_limit
        self._since = time.monotonic()
        self._spent_before = state.active_seconds

    def before_turn(self, step: str) -> None:
        """Raise `RunLimitReached` when no agent may take another turn."""
        limits, state = self.limits, self.state
        if limits.max_agent_turns is not None and state.agent_turns >= limits.max_agent_turns:
            raise RunLimitReached(
                f"run stopped at step {step}: limits.max_agent_turns ({limits.max_agent_turns})"
                " reached",
                step=step,
            )
        if limits.max_tokens is not None and state.total_tokens >= limits.max_tokens:
            raise RunLimitReached(
                f"run stopped at step {step}: limits.max_tokens ({limits.max_tokens}) reached "
                f"({state.total_tokens} tokens used)",
                step=step,
            )
        if self.cost_limit is not None:
            spent = self.cost_limit.cost_of(state)
            if spent is not None and spent >= self.cost_limit.max_cost:
                raise RunLimitReached(
                    f"run stopped at step {step}: limits.max_cost "
                    f"(${self.cost_limit.max_cost:.4f}) reached (${spent:.4f} spent)",
                    step=step,
                )

    def remaining_time(self) -> float | None:
        """Seconds left of `limits.timeout` (None: no timeout)."""
        if self.limits.timeout is None:
            return None
        return max(0.0, self.limits.timeout - self._spent_before)

    def timeout_message(self) -> str:
        return f"run stopped: limits.timeout ({format_limit(self.limits.timeout)}) reached"

    def record_time(self) -> None:
        """Store the time spent running so far (called before each checkpoint)."""
        self.state.active_seconds = self._spent_before + time.monotonic() - self._since


def stricter(limits: Limits, extra: Limits | None) -> Limits:
    """The workflow's `limits:` with `extra` on top: of each limit, the smaller one (per
    step for `max_visits`; `output_bytes_kept` when `extra` sets it); how many visits are
    kept stays the workflow's."""
    if extra is None:
        return limits
    if "output_bytes_kept" in extra.model_fields_set:
        kept = min(limits.output_bytes_kept, extra.output_bytes_kept)
        limits = limits.model_copy(update={"output_bytes_kept": kept})
    if not extra.any:
        return limits

    def smaller(mine: Any, given: Any) -> Any:
        return given if mine is None else mine if given is None else min(mine, given)

    values: dict[str, Any] = {
        name: smaller(getattr(limits, name), getattr(extra, name))
        for name in ("max_agent_turns", "max_tokens", "timeout")
    }
    visits = dict(limits.max_visits)
    for step, limit in extra.max_visits.items():
        visits[step] = smaller(visits.get(step), limit)
    values["max_visits"] = visits
    return limits.model_copy(update=values)
