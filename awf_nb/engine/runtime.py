"""What a step executor may use of the run executing it: the `StepRun` interface.

The step modules (steps.py, agent_step.py, agent.py, conversation.py, partner.py,
tool_calls.py) are handed the run as a `StepRun` — the `Runner` (run.py) is its one
implementation, and they never import it. Through it a step reads the run's context and
settings, reports events (`send` adds the run id, `emit` masks every event before the
frontend sees it), saves progress, runs other steps (loops, parallel branches) and
starts a called workflow as a child run (`call_workflow`).

`RunEnds` is how a step says the run must end here; `MAX_CALL_DEPTH` bounds
`call_workflow` nesting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from awf_nb.engine import events as ev
    from awf_nb.engine.config import RunConfig
    from awf_nb.engine.context import LoopFrame, RunContext
    from awf_nb.engine.interruption import TurnInterruption
    from awf_nb.engine.limits import RunBudget
    from awf_nb.engine.ports import Provider
    from awf_nb.engine.state import RunState, StepState, Turn
    from awf_nb.secrets import Masker
    from awf_nb.workflow.model import AnyStep, Workflow

# How deep `call_workflow` may nest (a workflow calling one calling one …).
MAX_CALL_DEPTH = 10


class RunEnds(Exception):
    """Raised inside the loop when the run must end here (inline failure, fatal route).

    `reason` becomes the run's `completion_reason`."""

    def __init__(self, message: str, exit_code: int = 3, reason: str = "step_failed") -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.reason = reason


@dataclass
class StepOutcome:
    state: StepState
    jump: str | None = None  # a loop body routed out of its loop to this step


class StepRun(Protocol):
    """The run, as a step executor sees it."""

    # --- what the run is -------------------------------------------------------------------

    @property
    def run_id(self) -> str: ...

    @property
    def workflow(self) -> Workflow: ...

    @property
    def state(self) -> RunState: ...

    @property
    def ctx(self) -> RunContext: ...

    @property
    def config(self) -> RunConfig: ...

    @property
    def masker(self) -> Masker: ...

    @property
    def limits(self) -> RunBudget: ...

    # --- telling the frontend -----------------------------------------------------------------

    def emit(self, event: ev.RunEvent) -> None:
        """Show `event` (masked) to the frontend; a failing frontend never fails the run."""
        ...

    def send(self, kind: type[ev.RunEvent], *fields: Any, **named: Any) -> None:
        """`emit(kind(run_id, *fields, **named))`: the event, with this run's id."""
        ...

    def warn(self, message: str, step: str = "") -> None:
        """A `RunWarning` (masked)."""
        ...

    def warn_once(self, key: str, message: str, step: str = "") -> None:
        """A `RunWarning` shown once per run for `key`."""
        ...

    # --- running -----------------------------------------------------------------------------

    def provider(self, name: str) -> Provider: ...

    def interruptible(self) -> TurnInterruption: ...

    async def run_step(self, step: AnyStep, loop: LoopFrame | None = None) -> StepOutcome: ...

    def route(self, step: AnyStep, st: StepState, loop: LoopFrame | None = None) -> str: ...

    def earlier_visit(self, step: str) -> StepState | None: ...

    async def call_workflow(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any],
        *,
        step: str,
        stack: tuple[str, ...],
        resume: tuple[str, str] | None = None,
    ) -> RunState:
        """Run `workflow` as a child of this run (its events shown as `step.child_step`,
        its providers, reader, store and tools this run's) and return its final state.
        `resume`: (a stored child run, the step to go on from) instead of a new run."""
        ...

    # --- saving ------------------------------------------------------------------------------

    def checkpoint(self, *, history: bool = False) -> None: ...

    def append_transcript(self, record: dict[str, Any]) -> int: ...

    def append_turn(self, step: str, turn: Turn) -> int: ...

    def sync_transcript(self) -> None: ...

    def edited_input(self, step: str) -> str | None:
        """The step's command or prompt as edited at a breakpoint (once), else None."""
        ...
