"""How to run a workflow: `RunOptions` (everything but the workflow), `Resume` (which run to
continue).

`RunOptions` is one frozen object, checked when it is made, given to the one set-up
function (`awf_nb.runs.prepare_run`) by every entry point: `awf run` / `awf resume`, the
`%%awf` magic, `awf_nb.run` / `arun`, and evaluations (which make one per case).

A frontend (`awf_nb.frontends`) is chosen by the entry point and handed in as a `Frontend`
(`session.py`): the set-up opens it once, before the run is made, and the session it gives
runs the run, so nothing is connected to a run afterwards. This package imports no frontend.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from awf_nb.errors import UserError

if TYPE_CHECKING:
    from awf_nb.engine.breakpoints import Debugger, OnPause
    from awf_nb.engine.inputs import AskFunction
    from awf_nb.engine.limits import CostLimit
    from awf_nb.engine.partner import SimulatedUser
    from awf_nb.engine.ports import EventSink, InputReader, ProviderFactory
    from awf_nb.runs.session import Frontend
    from awf_nb.store import Store
    from awf_nb.traces import TraceCost
    from awf_nb.workflow.model import Limits

PathLike = str | os.PathLike[str]

__all__ = [
    "Resume",
    "RunKeywords",
    "RunOptions",
    "kept_options",
    "resumed_options",
]


@dataclass(frozen=True)
class Resume:
    """Continue the stored run `run_id` (a unique prefix is enough) at the step it stopped
    at, or at `from_step`."""

    run_id: str
    from_step: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Everything about a run that is not in the workflow file. All optional.

    Who answers the conversations:
      `replies` — messages given up front, in order, then end of input (`--reply`);
      `reader` — an `InputReader` of your own; `user` — a `SimulatedUser` playing the
      person in every conversation the person would answer; `interactive` — whether the
      frontend may ask the person (a `> ` prompt, a text box) when neither `replies` nor
      `reader` answers; `ask` — asks for a missing required input (the CLI, on a
      terminal); `yes` — tool calls listed in `tools.confirm` run without asking.

    How it is shown: `frontend` — a frontend chosen by the entry point
      (`awf_nb.frontends.auto.pick_frontend`), opened once; its session runs the run;
      `sink` — an `EventSink` of your own, which replaces the frontend's (the frontend
      may still ask). Neither: nothing is shown.

    Cassettes (at most one of the three): `record=PATH` writes every provider turn and
      person message (secrets masked); `replay=PATH` answers them from one, calling no
      provider; `record_missing=PATH` replays PATH when it exists and records it when it
      does not. `replay_speed` multiplies the recorded delays (0, the default: at once).

    Where and with what: `storage` — a `Store`, a folder, True/None for the default
      folder, False to keep nothing; `providers` — a provider factory of your own (the
      registry's otherwise); `model` — what `provider: local` steps run on instead of the
      bundled model (`ollama:llama3.2`, …; default: $AWF_MODEL; not with `providers`);
      `cwd` (default: the working directory); `env` (default:
      this process's environment); `limits` — `max_agent_turns`, `max_tokens`, `timeout`
      on top of the workflow's own `limits:` (of each, the stricter applies).

    Traces (docs/observability.md): `otlp` — a collector's OTLP/HTTP endpoint to send the
      run's spans to (default: $AWF_OTLP_ENDPOINT, then the standard OTEL_EXPORTER_OTLP_*
      variables); `trace_content` — message contents on the spans (masked); `trace_file` —
      False: no trace file next to the transcript (default: $AWF_TRACE_FILE, else yes);
      `trace_tags` — attributes of the run's span (an eval's id, case, epoch, variant);
      `trace_cost` — how the run is priced on its spans (`traces.TraceCost`: an eval's).

    Breakpoints (docs/debugging.md): `break_before` / `break_after` — steps to pause
      before / after (`*`: every step); `breakpoints` — honour the steps' own
      `breakpoint:` (default: when the frontend can ask the person); `on_pause` — answers
      each pause: a function (or coroutine function) given a `Pause` that returns a
      `PauseAnswer`, an action's name (`"continue"`, `"step"`, `"skip"`, `"abort"`) or
      None (continue); without it the frontend asks (the terminal's prompt).
    """

    inputs: Mapping[str, Any] = field(default_factory=dict)
    replies: Sequence[str] | None = None
    reader: InputReader | None = None
    user: SimulatedUser | None = None
    interactive: bool = True
    ask: AskFunction | None = None
    yes: bool = False
    frontend: Frontend | None = None
    sink: EventSink | None = None
    record: PathLike | None = None
    replay: PathLike | None = None
    record_missing: PathLike | None = None
    replay_speed: float = 0.0
    storage: Store | PathLike | bool | None = None
    providers: ProviderFactory | None = None
    model: str | None = None
    cwd: PathLike | None = None
    env: Mapping[str, str] | None = None
    limits: Limits | Mapping[str, Any] | None = None
    otlp: str | None = None
    trace_content: bool = False
    trace_file: bool | None = None
    trace_tags: Mapping[str, Any] = field(default_factory=dict)
    trace_cost: TraceCost | None = None
    # The most the run may cost in USD (`engine.limits.CostLimit`: an evaluation's).
    cost_limit: CostLimit | None = None
    break_before: Sequence[str] = ()
    break_after: Sequence[str] = ()
    breakpoints: bool | None = None
    on_pause: OnPause | Debugger | None = None

    def __post_init__(self) -> None:
        # Frozen: what the caller passed is copied, so changing their list later changes
        # nothing here.
        if self.replies is not None:
            if isinstance(self.replies, str):
                raise UserError("replies must be a list of messages, not one string")
            object.__setattr__(self, "replies", tuple(self.replies))
        object.__setattr__(self, "inputs", dict(self.inputs or {}))
        for name in ("break_before", "break_after"):
            steps = getattr(self, name)
            if isinstance(steps, str):
                raise UserError(f"{name} must be a list of step names, not one string")
            object.__setattr__(self, name, tuple(steps or ()))
        given = [
            name
            for name in ("record", "replay", "record_missing")
            if getattr(self, name) is not None
        ]
        if len(given) > 1:
            raise UserError(f"{' and '.join(given)} cannot be used together: choose one")
        if self.limits is not None:
            object.__setattr__(self, "limits", _limits(self.limits))

    @property
    def working_dir(self) -> Path:
        return Path(self.cwd if self.cwd is not None else Path.cwd()).resolve()


class RunKeywords(TypedDict, total=False):
    """The keywords `awf_nb.run` / `arun` take besides the workflow, its inputs and `show`:
    `RunOptions`' fields, for type checkers and editors (what each means is there)."""

    replies: Sequence[str] | None
    reader: InputReader | None
    user: SimulatedUser | None
    interactive: bool
    ask: AskFunction | None
    yes: bool
    frontend: Frontend | None
    sink: EventSink | None
    record: PathLike | None
    replay: PathLike | None
    record_missing: PathLike | None
    replay_speed: float
    storage: Store | PathLike | bool | None
    providers: ProviderFactory | None
    model: str | None
    cwd: PathLike | None
    env: Mapping[str, str] | None
    limits: Limits | Mapping[str, Any] | None
    otlp: str | None
    trace_content: bool
    trace_file: bool | None
    trace_tags: Mapping[str, Any]
    trace_cost: TraceCost | None
    cost_limit: CostLimit | None
    break_before: Sequence[str]
    break_after: Sequence[str]
    breakpoints: bool | None
    on_pause: OnPause | Debugger | None


def _limits(value: Limits | Mapping[str, Any]) -> Limits:
    from pydantic import ValidationError

    from awf_nb.workflow.model import Limits

    if isinstance(value, Limits):
        return value
    try:
        return Limits.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'limits'}: {error['msg']}"
            for error in exc.errors()
        )
        raise UserError(f"limits: {problems}") from None


# --- what a run keeps of its options for `awf resume` --------------------------------------------


def kept_options(limits: Limits, user: SimulatedUser | None) -> dict[str, Any]:
    """What of a run's options `awf resume` applies again, as the run's state keeps it
    (`RunState.run_options`): the limits in force (the workflow's own with the caller's on
    top, an eval's among them) and the simulated user. The workflow text is kept already;
    these are not in it."""
    kept: dict[str, Any] = {}
    limits_set = limits.model_dump(mode="json", exclude_defaults=True)
    if limits_set:
        kept["limits"] = limits_set
    if user is not None:
        kept["user"] = dataclasses.asdict(user)
    return kept


def resumed_options(options: RunOptions, kept: Mapping[str, Any]) -> RunOptions:
    """The options of `awf resume` with what the run was started with (`kept_options`):
    its limits, with any given now on top (the stricter of each), and its simulated user
    unless someone else answers now (replies, a reader, another simulated user)."""
    from awf_nb.engine.limits import stricter
    from awf_nb.engine.partner import SimulatedUser

    changes: dict[str, Any] = {}
    if kept.get("limits"):
        saved = _limits(kept["limits"])
        changes["limits"] = stricter(saved, options.limits)  # type: ignore[arg-type]
    saved_user = kept.get("user")
    if saved_user and options.user is None and options.replies is None and options.reader is None:
        try:
            changes["user"] = SimulatedUser(**saved_user)
        except TypeError as exc:  # a state file from another version, or edited
            raise UserError(f"the run's stored simulated user cannot be read: {exc}") from None
    return dataclasses.replace(options, **changes) if changes else options
