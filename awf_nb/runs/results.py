"""What a finished run produced: `RunResult` (`awf_nb.run` returns one; so does the set-up's
`PreparedRun.run`, and a notebook run handle when awaited).

It lives below the frontends so that they, the Python API and evaluations can all hand
one back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from awf_nb.engine.exchange import ExchangeTurn, run_exchange
from awf_nb.engine.state import RunState, StepState

if TYPE_CHECKING:
    from awf_nb.providers.cassette.replay import Unused
    from awf_nb.store import Store

__all__ = ["ReplayReport", "RunResult", "status_json"]


@dataclass(frozen=True)
class ReplayReport:
    """What a replayed run did with its cassette (`RunResult.replay`).

    `cassette`: the file replayed; `mismatches`: each turn the run asked that the recording
    does not hold, in words (the run stopped at the first); `unused`: what of the cassette
    the run did not use (`unused.turns`, `unused.inputs`, `unused.where`; false when it used
    every turn and message). `matched` is True when the run was the recorded one.
    """

    cassette: str
    mismatches: tuple[str, ...]
    unused: Unused

    @property
    def matched(self) -> bool:
        return not self.mismatches and not self.unused

    def describe(self) -> str:
        """One line: `replayed chat.cassette.jsonl: matched`, or what differed."""
        if self.matched:
            return f"replayed {self.cassette}: matched"
        parts = [*self.mismatches]
        if self.unused:
            parts.append(f"unused: {self.unused.describe()}")
        return f"replayed {self.cassette}: " + "; ".join(parts)


@dataclass
class RunResult:
    """What a finished run produced. `steps["chat"].conversation.turns` etc.; the whole
    conversation in order as `exchange`, and why the run ended as `completion_reason`."""

    state: RunState
    store: Store | None = field(default=None, repr=False)  # where its transcript is
    # A replayed run's report (what its cassette replayed, what did not match); None
    # when the run was not replayed.
    replay: ReplayReport | None = field(default=None, repr=False)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def ok(self) -> bool:
        return self.state.status == "completed"

    @property
    def error(self) -> str:
        return self.state.error

    @property
    def message(self) -> str:
        return self.state.message

    @property
    def exit_code(self) -> int:
        return self.state.exit_code

    @property
    def steps(self) -> dict[str, StepState]:
        return self.state.steps

    @property
    def outputs(self) -> dict[str, str]:
        """Each executed step's `Output`."""
        return {name: step.output for name, step in self.state.steps.items()}

    @property
    def tokens(self) -> int:
        """The run's tokens: every reply's input + output tokens, both sides of every
        conversation, as the summary and `awf status` show them."""
        return self.state.total_tokens

    @property
    def tokens_estimated(self) -> bool:
        """Whether some of `tokens` are the len/4 estimate (a provider reported no usage)."""
        return self.state.tokens_estimated

    @property
    def completion_reason(self) -> str:
        """`terminal`, `failure_terminal`, `step_failed`, `limit` or `cancelled`."""
        return self.state.completion_reason

    @property
    def exchange(self) -> list[ExchangeTurn]:
        """Every message of the run in order: speaker, step, turn, text, tokens, start
        time, duration (engine/exchange.py)."""
        return run_exchange(self.state, _transcript(self.store, self.state.run_id))

    @property
    def duration(self) -> float:
        """Seconds spent running, summed over resumes (not the time it sat interrupted)."""
        return self.state.duration

    def raise_for_status(self) -> RunResult:
        if not self.ok:
            from awf_nb.errors import ExecutionError

            raise ExecutionError(f"workflow {self.state.workflow_name} {self.status}: {self.error}")
        return self

    def summary(self) -> str:
        """What the run did, as text: outcome, figures, each step, how to continue."""
        from awf_nb.engine.summary import RunSummary

        return RunSummary.from_state(self.state).to_text()

    def __repr__(self) -> str:
        return f"<RunResult {self.state.workflow_name} {self.status} run={self.run_id}>"

    def to_json(self) -> str:
        return self.state.to_json()

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state.to_json())  # a RunState: a JSON object
        return data


def _transcript(store: Any, run_id: str) -> list[dict[str, Any]] | None:
    """The run's transcript records, or None when the run is not stored."""
    reader = getattr(store, "read_transcript", None)
    return reader(run_id) if reader is not None else None


def status_json(state: RunState, store: Any) -> str:
    """`awf status --json`: the run's state, with its conversation in order (`exchange`)."""
    data = json.loads(state.to_json())
    records = _transcript(store, state.run_id)
    data["exchange"] = [turn.as_dict() for turn in run_exchange(state, records)]
    return json.dumps(data, indent=2)
