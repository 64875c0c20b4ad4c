"""The state of a run: what templates, `awf status`, state files and `RunResult` see.

Plain pydantic data with snake_case JSON keys (the state file format). Templates see the
PascalCase view of a step (`{{.states.build.Output}}`) through `StepState.template_view`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from awf_nb.engine.events import PERSON
from awf_nb.engine.statuses import RunStatus, StepStatus, StoppedBy

__all__ = ["RunStatus", "StepStatus", "StoppedBy"]  # re-exported; the models are below


def now() -> datetime:
    return datetime.now(UTC)


class _State(BaseModel):
    model_config = ConfigDict(populate_by_name=True, validate_assignment=False)


class Turn(_State):
    """One message of a conversation."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    # What writing this message cost, when a model wrote it (the step's agent, a partner
    # agent): the input tokens it was sent plus the output tokens it wrote, as the provider
    # reported them, else estimated (`tokens_estimated`). 0 for what the person typed, the
    # step's prompt, scripted replies and tool results: they count in the input tokens of
    # the reply they are sent with.
    tokens: int = 0
    tokens_estimated: bool = False
    # A reply (or a partner agent's message) cut short by Ctrl-C / Stop, a provider error
    # or a timeout; a partner's message cut short never reached the step's agent.
    interrupted: bool = False
    cut: bool = False  # a reply cut at its length limit (max_tokens)
    duration: float = 0.0  # seconds the reply took to stream (an agent's, a partner agent's)
    truncated_turns: int = 0  # pairs the provider dropped to fit its context window
    # Who said it, when not the obvious party: on a user turn, the conversation partner
    # that sent it (an agent's name, `user (simulated)`), or `person` when the person
    # stepped into an exchange between agents; "" for the person as the partner, or the
    # step's prompt. On an assistant turn always "" (the step's own agent).
    speaker: str = ""
    # On a partner agent's message: what the partner was sent to answer, when it was not
    # the agent's reply before it verbatim (a `conversation.with.prompt` template, rendered).
    sent: str = ""
    # On a partner's message that ended the conversation (a simulated user's `exit`, an
    # empty message): recorded, never sent to the step's agent.
    ended: bool = False
    # Chat mode: the tool calls an assistant turn asked for ({id, name, arguments}); a
    # `tool` turn answers one of them (`tool_call_id`, the tool's `name`).
    tool_calls: list[dict[str, str]] = Field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""

    @property
    def reached_agent(self) -> bool:
        """Whether the step's agent was sent this turn: not a partner's message that was
        cut short or ended the conversation."""
        return not (self.role == "user" and (self.interrupted or self.ended))

    @property
    def by_partner(self) -> bool:
        """A message written by the conversation partner (not the person stepping in)."""
        return self.role == "user" and self.speaker not in ("", PERSON)


class ConversationState(_State):
    session_id: str = ""
    provider: str = ""  # the provider that owns the session; another one cannot resume it
    turns: list[Turn] = Field(default_factory=list)
    total_turns: int = 0  # assistant replies received
    # The tokens of every message of the conversation (the sum of its turns' `tokens`):
    # both sides, turns inherited through `continue_from` and earlier visits included.
    total_tokens: int = 0
    # The partner agent's share of `total_tokens` (`conversation.with`, a simulated user).
    partner_tokens: int = 0
    stopped_by: StoppedBy = ""
    # A partner agent's own session (`conversation.with`): its id for session-id providers
    # and how many messages it sent. Its message list is derived from `turns`.
    partner_session_id: str = ""
    partner_turns: int = 0
    # Replies before the current visit of the step (a cycle re-entering it continues the
    # session); `max_turns` and `turn` count from here.
    visit_start: int = 0
    # While a conversation is running, the turns from index `live_from` on are not written
    # into the state file (that would rewrite the whole history every turn) but appended to
    # the run's transcript, starting at transcript line `transcript_line`; loading a state
    # file puts them back. None once the step has finished and the state holds every turn.
    live_from: int | None = None
    transcript_line: int = 0

    def count_replies(self) -> int:
        """The agent's replies in `turns`: assistant turns, the rounds that follow tool
        results counted with the reply they continue."""
        replies, previous = 0, ""
        for turn in self.turns:
            if turn.role == "assistant" and previous != "tool":
                replies += 1
            if turn.role != "system":
                previous = turn.role
        return replies

    def partner_exchanges(self) -> Iterator[tuple[str, Turn]]:
        """The partner agent's own conversation: for each message it wrote (cut short ones
        included), what it was sent to answer — the agent's reply before it, or what its
        `prompt` template made of it — and the message. This is the message list the
        partner is sent, live and after `awf resume` alike; the person stepping in is not
        part of it (the partner never sees what they typed)."""
        reply = ""
        for turn in self.turns:
            if turn.role == "assistant":
                reply = turn.content
            elif turn.by_partner:
                yield turn.sent or reply, turn

    def partner_transcript(self) -> list[dict[str, Any]]:
        """The exchange as the partner saw it (`partner_exchanges`): what it was sent are
        its `user` messages, what it wrote its `assistant` ones. Empty when the person was
        the partner."""
        seen: list[dict[str, Any]] = []
        for sent, turn in self.partner_exchanges():
            seen.append({"role": "user", "content": sent})
            seen.append(
                {
                    "role": "assistant",
                    "content": turn.content,
                    "speaker": turn.speaker,
                    "interrupted": turn.interrupted,
                }
            )
        return seen

    def partner_message(self) -> str:
        """The partner's last message that reached the agent ("" before its first)."""
        return next(
            (t.content for t in reversed(self.turns) if t.by_partner and t.reached_agent), ""
        )

    def fork(self) -> ConversationState:
        """A copy for `continue_from`: same session and turns, `stopped_by` reset."""
        clone = self.model_copy(deep=True)
        clone.stopped_by = ""
        clone.live_from = None
        return clone


class ChildGroupState(_State):
    """A process group a step started that may still run (see engine/process.py)."""

    pgid: int
    tag: str = ""  # a contained group's environment tag: its escaped processes too


class Visit(_State):
    """One finished visit of a step (a cycle or a loop ran it again), as
    `{{.states.NAME.Visits}}` lists it."""

    number: int  # 1 for the step's first visit in the run
    status: StepStatus = "completed"
    output: str = ""
    error: str = ""
    exit_code: int | None = None
    stopped_by: StoppedBy = ""
    tokens_used: int = 0
    tokens_input: int = 0
    tokens_output: int = 0
    tokens_estimated: bool = False
    started_at: datetime | None = None
    completed_at: datetime | None = None

    def view(self) -> dict[str, Any]:
        return {
            "Visit": self.number,
            "Output": self.output,
            "Status": self.status,
            "Error": self.error,
            "ExitCode": self.exit_code if self.exit_code is not None else 0,
            "StoppedBy": self.stopped_by,
            "TokensUsed": self.tokens_used,
            "TokensInput": self.tokens_input,
            "TokensOutput": self.tokens_output,
            "TokensEstimated": self.tokens_estimated,
            "StartedAt": self.started_at.isoformat() if self.started_at else "",
            "CompletedAt": self.completed_at.isoformat() if self.completed_at else "",
        }


_FINISHED = frozenset({"completed", "failed", "cancelled", "skipped"})


class StepState(_State):
    name: str
    status: StepStatus = "pending"
    output: str = ""
    stderr: str = ""
    exit_code: int | None = None
    response: Any = None  # parsed JSON object when the output is one
    json_: Any = Field(default=None, alias="json")  # output_format: json
    tokens_used: int = 0
    # A parallel step's tokens are its branches' (each also a step of the run): shown on the
    # step, not counted again in the run's total.
    sums_branches: bool = False
    # The process group of a command while it runs (0 otherwise): if awf is killed, the
    # next `awf resume` stops what is left of it before running anything again.
    process_group: int = 0
    # The groups an agent step's tool calls, MCP servers and agent CLI run while they do:
    # `awf resume` stops what a killed run left of them, as for a command.
    process_groups: list[ChildGroupState] = Field(default_factory=list)
    tokens_input: int = 0
    tokens_output: int = 0
    tokens_estimated: bool = False
    # USD its turns cost as the provider reported it (agent CLIs that do: claude); None
    # when none reported a cost (an evaluation then prices the tokens with `pricing:`).
    reported_cost_usd: float | None = None
    error: str = ""
    started_at: datetime | None = None
    completed_at: datetime | None = None
    # The time a conversation re-opened by `awf resume` had run before, in earlier sessions
    # (the time the run sat interrupted is not in it).
    earlier_seconds: float = 0.0
    attempt: int = 0
    conversation: ConversationState | None = None
    # Which visit of the step this is (1: its first run), and the earlier visits that
    # finished, oldest first (the last `limits.visits_kept`).
    visit: int = 1
    visits: list[Visit] = Field(default_factory=list)
    # The run a call_workflow step started (its own folder in the store), so a fork can
    # branch inside it.
    child_run: str = ""

    def as_visit(self) -> Visit:
        """This visit of the step, as an entry of `Visits`."""
        conv = self.conversation
        return Visit(
            number=self.visit,
            status=self.status,
            output=self.output,
            error=self.error,
            exit_code=self.exit_code,
            stopped_by=conv.stopped_by if conv is not None else "",
            tokens_used=self.tokens_used,
            tokens_input=self.tokens_input,
            tokens_output=self.tokens_output,
            tokens_estimated=self.tokens_estimated,
            started_at=self.started_at,
            completed_at=self.completed_at,
        )

    def after_visit(self, number: int) -> StepState | None:
        """The step's state as it was after its `number`-th visit (the inverse of
        `as_visit`, from its kept visits); None when that visit is not kept."""
        if number <= 0:
            return None
        if self.visit == number:
            return self
        for index, visit in enumerate(self.visits):
            if visit.number == number:
                return StepState(
                    name=self.name,
                    status=visit.status,
                    output=visit.output,
                    error=visit.error,
                    exit_code=visit.exit_code,
                    tokens_used=visit.tokens_used,
                    tokens_input=visit.tokens_input,
                    tokens_output=visit.tokens_output,
                    tokens_estimated=visit.tokens_estimated,
                    started_at=visit.started_at,
                    completed_at=visit.completed_at,
                    visit=number,
                    visits=self.visits[:index],
                )
        return None

    def visits_view(self) -> list[dict[str, Any]]:
        """Every finished visit, oldest first: the earlier ones, then this one once done."""
        views = [visit.view() for visit in self.visits]
        if self.status in _FINISHED:
            views.append(self.as_visit().view())
        return views

    @property
    def duration(self) -> float:
        """The time the step spent running: from its start to its end in this session,
        plus `earlier_seconds`; 0 while it has not ended."""
        if self.started_at and self.completed_at:
            return self.earlier_seconds + (self.completed_at - self.started_at).total_seconds()
        return 0.0

    def seconds_until(self, saved_at: datetime | None) -> float:
        """The time it ran until the end of its session: its end, or the run's last save
        (`saved_at`) for a step a killed run left running."""
        if self.completed_at is not None:
            return self.duration
        end = saved_at or self.started_at
        if self.started_at is None or end is None:
            return self.earlier_seconds
        return self.earlier_seconds + max(0.0, (end - self.started_at).total_seconds())

    def template_view(self) -> dict[str, Any]:
        """The step as templates and conditions see it (`.states.NAME.Output`, …)."""
        conv = self.conversation
        conv_view: dict[str, Any] | None = None
        if conv is not None:
            turns = [t.model_dump() for t in conv.turns]
            partner = conv.partner_transcript()
            partner_message = conv.partner_message()
            conv_view = {
                "PartnerMessage": partner_message,
                "PartnerTranscript": partner,
                "PartnerSessionID": conv.partner_session_id,
                "PartnerTokens": conv.partner_tokens,
                "partner_message": partner_message,
                "partner_transcript": partner,
                "partner_session_id": conv.partner_session_id,
                "partner_tokens": conv.partner_tokens,
                "SessionID": conv.session_id,
                "Turns": turns,
                "TotalTurns": conv.total_turns,
                "TotalTokens": conv.total_tokens,
                "StoppedBy": conv.stopped_by,
                # lowercase aliases, as the seed docs spell them
                "session_id": conv.session_id,
                "turns": turns,
                "total_turns": conv.total_turns,
                "total_tokens": conv.total_tokens,
                "stopped_by": conv.stopped_by,
            }
        return {
            "Output": self.output,
            "Stderr": self.stderr,
            "ExitCode": self.exit_code if self.exit_code is not None else 0,
            "Status": self.status,
            "Response": self.response,
            "JSON": self.json_,
            "TokensUsed": self.tokens_used,
            "TokensInput": self.tokens_input,
            "TokensOutput": self.tokens_output,
            "TokensEstimated": self.tokens_estimated,
            "Error": self.error,
            "Conversation": conv_view,
            "conversation": conv_view,
            "Visit": self.visit,
            "Visits": self.visits_view(),
        }


class RunState(_State):
    """Everything needed to show, audit and resume one run."""

    run_id: str
    workflow_name: str
    workflow_path: str = ""  # the file it was loaded from, "" for inline YAML
    # The YAML text exactly as written, so a run can be resumed even if the file changed.
    # It may hold secrets: never dumped (the store keeps it in a private file of its own).
    workflow_source: str = Field(default="", exclude=True, repr=False)
    status: RunStatus = "pending"
    inputs: dict[str, Any] = Field(default_factory=dict)
    # Inputs that took their default: a masked secret among them is re-read from the
    # workflow text on resume instead of being asked for again.
    defaulted_inputs: list[str] = Field(default_factory=list)
    current_step: str = ""
    steps: dict[str, StepState] = Field(default_factory=dict)
    executed: list[str] = Field(default_factory=list)  # step names in execution order
    started_at: datetime = Field(default_factory=now)
    completed_at: datetime | None = None
    error: str = ""
    message: str = ""  # the terminal step's message
    exit_code: int = 0
    parent_run_id: str = ""  # set for call_workflow children
    # Set for a run made by `awf fork`: {"run": id, "step": name, "turn": n or None}.
    forked_from: dict[str, Any] | None = None
    # Set by a fork inside a parallel step, a loop or a called workflow: where the step the
    # fork resumes at picks up, used once by that step (engine/steps.py) —
    # {"step", "keep": [branches kept]}, {"step", "iteration": n, "results": [...]} or
    # {"step", "child": run id, "from": step}.
    resume_inside: dict[str, Any] | None = None
    # Where the run pauses (engine/breakpoints.py), kept so `awf resume` pauses at the same
    # steps; and the pauses it is waiting at ({step: "before" | "after"}): written before
    # the person is asked, so a run killed at a breakpoint pauses there again on resume.
    breakpoints: dict[str, Any] | None = None
    paused: dict[str, str] = Field(default_factory=dict)
    pid: int = 0  # the process running it, so `awf resume` can refuse a run still alive
    host: str = ""
    pid_started: str = ""  # that process's start time, so a reused pid is not taken for it
    # What `limits:` counts across the whole run, resumes included.
    agent_turns: int = 0  # replies of every agent: steps' agents and partner agents
    # Tokens of step visits whose state a later visit replaced (loops, cycles, retries of
    # a resumed step): still spent, so still in the run's total.
    earlier_tokens: int = 0
    active_seconds: float = 0.0  # time spent running, summed over resumes
    saved_at: datetime | None = None  # when the state was last checkpointed
    # How many times each step has started (`limits.max_visits`), resumes included.
    visits: dict[str, int] = Field(default_factory=dict)
    # Why the run ended (set when it does): `terminal` (a success terminal), `failure_terminal`,
    # `step_failed` (a failure nothing routed), `limit` (one of `limits:`), `cancelled`.
    completion_reason: str = ""
    # What the run was started with that `awf resume` needs again and its workflow text
    # does not hold: the limits in force (an eval's on top of the workflow's) and the
    # simulated user. Written and read by `awf_nb.runs.options` (`kept_options`), masked.
    run_options: dict[str, Any] = Field(default_factory=dict)
    storage_version: int = 1

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        # Which run, and how it stands: a state holds every conversation of the run, whole,
        # which is no one-line answer to `print(state)` (the fields are all there to read).
        # Python 3.11's `asyncio.run` also formats its task's result twice when it restores
        # the SIGINT handler, so a long repr slowed every run's end.
        yield "run_id", self.run_id
        yield "workflow_name", self.workflow_name
        yield "status", self.status
        yield "current_step", self.current_step
        if self.error:
            yield "error", self.error

    @property
    def duration(self) -> float:
        """The time spent running, summed over its sessions (`awf resume` included): the
        hours a run sat interrupted are not in it (they are in `wall_duration`). As of the
        last save while it runs."""
        return self.active_seconds if self.active_seconds else self.wall_duration

    @property
    def wall_duration(self) -> float:
        """From the start to the end (or now), the time it sat interrupted included."""
        end = self.completed_at or now()
        return (end - self.started_at).total_seconds()

    @property
    def tokens_estimated(self) -> bool:
        """Whether some of `total_tokens` are the len/4 estimate (no usage reported)."""
        return any(s.tokens_estimated for s in self.steps.values())

    def is_alive_elsewhere(self) -> bool:
        """Still running in another live process on this machine?"""
        import os

        if self.status != "running" or not self.pid or self.pid == os.getpid():
            return False
        return self._process_alive() is not False

    def shown_status(self) -> str:
        """The status to show: a "running" run whose process is gone is "interrupted"."""
        import os

        if self.status == "running" and self.pid != os.getpid() and self._process_alive() is False:
            return "interrupted"
        return self.status

    def _process_alive(self) -> bool | None:
        """Whether the run's process lives; None when that cannot be told (another host)."""
        import os
        import socket

        if not self.pid:
            return False
        if self.host and self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        started = process_start_time(self.pid)
        return not (self.pid_started and started and started != self.pid_started)

    @property
    def total_tokens(self) -> int:
        current = sum(s.tokens_used for s in self.steps.values() if not s.sums_branches)
        return self.earlier_tokens + current

    def to_json(self, *, indent: int | None = 2) -> str:
        return self.model_dump_json(by_alias=True, indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        return cls.model_validate(json.loads(text))


def process_start_time(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc), "" if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def new_run_id() -> str:
    """A run id: UTC start time + random hex (`20261122-030501-3fa9c1`), sorting by start.

    The store reserves it (creates the run's folder, retrying on a clash)."""
    import secrets

    return f"{now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
