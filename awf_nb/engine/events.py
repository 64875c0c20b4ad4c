"""The events a run emits, in order, to its frontend (the `EventSink`).

Plain frozen dataclasses: cheap to create on the hot streaming path, easy to match on.
Every event names the run; step events name the step (a dotted path for steps inside a
called workflow, e.g. `review.lint`). Text in events is already secret-masked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from awf_nb.engine.state import Turn
    from awf_nb.engine.summary import RunSummary

# The `speaker` of a message the person typed into an exchange between agents (Ctrl-C /
# Stop, then a message), and the label of an agent playing the person (`--simulate-user`).
PERSON = "person"
SIMULATED_USER = "user (simulated)"


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    workflow: str
    inputs: dict[str, Any] = field(default_factory=dict)
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class RunFinished:
    run_id: str
    summary: RunSummary  # built from the final state: what every frontend shows

    @property
    def status(self) -> str:  # completed | failed | cancelled
        return self.summary.status

    @property
    def duration(self) -> float:
        return self.summary.duration

    @property
    def tokens(self) -> int:
        return self.summary.tokens

    @property
    def error(self) -> str:
        return self.summary.error

    @property
    def message(self) -> str:  # the terminal step's message
        return self.summary.message


@dataclass(frozen=True, slots=True)
class StepStarted:
    run_id: str
    step: str
    kind: str  # command | agent | terminal | parallel | for_each | while | call_workflow
    attempt: int = 1
    mode: str = ""  # agent steps: single | conversation
    detail: str = ""  # e.g. the command line or the provider name


@dataclass(frozen=True, slots=True)
class StepFinished:
    run_id: str
    step: str
    status: str  # completed | failed | skipped | cancelled
    duration: float
    tokens: int = 0
    tokens_estimated: bool = False
    error: str = ""
    output: str = ""


@dataclass(frozen=True, slots=True)
class StepOutput:
    """A chunk of a command step's stdout or stderr, as it arrives."""

    run_id: str
    step: str
    text: str
    stream: Literal["stdout", "stderr"] = "stdout"


@dataclass(frozen=True, slots=True)
class TurnStarted:
    run_id: str
    step: str
    turn: int  # 1-based number of the assistant reply about to stream
    speaker: str = ""  # "" for the step's agent; a conversation partner's name otherwise


@dataclass(frozen=True, slots=True)
class AgentText:
    """A streamed piece of an assistant reply (or of a partner agent's message)."""

    run_id: str
    step: str
    text: str
    speaker: str = ""  # "" for the step's agent; a conversation partner's name otherwise


@dataclass(frozen=True, slots=True)
class AgentToolUse:
    run_id: str
    step: str
    name: str
    argument: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The engine runs a tool the model called (chat mode: `tools:` on an agent step)."""

    run_id: str
    step: str
    call_id: str
    name: str
    arguments: str  # the arguments as JSON text, masked
    speaker: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call's result, as the model gets it (masked; capped by the tool)."""

    run_id: str
    step: str
    call_id: str
    name: str
    result: str
    is_error: bool = False
    duration: float = 0.0
    # how it ended when it did not run to the end: "refused" (by the person, or headless
    # without --yes) or "interrupted" (Ctrl-C / Stop)
    outcome: Literal["", "refused", "interrupted"] = ""
    speaker: str = ""


@dataclass(frozen=True, slots=True)
class AwaitingConfirmation:
    """A tool call waits for the person's yes or no (the step's `tools.confirm` list)."""

    run_id: str
    step: str
    call_id: str
    name: str
    arguments: str  # masked JSON text


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message sent to the step's agent by the person, a scripted reply, or a partner
    that does not stream (scripted `replies`). A partner agent's message streams instead
    (TurnStarted / AgentText / TurnFinished with its `speaker`)."""

    run_id: str
    step: str
    text: str
    turn: int = 1  # the assistant reply this message asks for (1 = the step's prompt)
    speaker: str = ""  # "" for the person (or the step's prompt); else the partner's name


@dataclass(frozen=True, slots=True)
class TurnFinished:
    run_id: str
    step: str
    turn: int
    tokens: int
    duration: float
    tokens_estimated: bool = False
    interrupted: bool = False
    text: str = ""  # the whole reply, for frontends that do not render deltas
    speaker: str = ""  # "" for the step's agent; a conversation partner's name otherwise
    cut: bool = False  # the reply was cut at its length limit (max_tokens)
    # What traces record of the turn (awf_nb/traces): the split of `tokens`, who answered
    # and what the provider said it cost (None: it did not say).
    input_tokens: int = 0
    output_tokens: int = 0
    provider: str = ""
    model: str = ""
    cost_usd: float | None = None
    tool_calls: int = 0  # calls this round asked for (the finish reason is then tool_calls)


@dataclass(frozen=True, slots=True)
class ModelLoading:
    """The model that answers a step is being loaded before its reply can start (a local
    model's first use in the process: seconds on a cold start). `done` when it is ready,
    `seconds` after it started; `speaker` as for TurnStarted."""

    run_id: str
    step: str
    model: str
    done: bool = False
    seconds: float = 0.0
    speaker: str = ""


@dataclass(frozen=True, slots=True)
class Said:
    """One message of a conversation, as a frontend shows it again (`ConversationResumed`):
    `role` is "prompt" (the step's prompt), "person", "agent" (the step's agent) or
    "partner" (`name` says which)."""

    role: Literal["prompt", "person", "agent", "partner"]
    text: str
    name: str = ""
    interrupted: bool = False
    cut: bool = False


# How many of its last messages a resumed conversation shows again (the rest is counted).
RESUMED_MESSAGES_SHOWN = 12


@dataclass(frozen=True, slots=True)
class ConversationResumed:
    """A conversation re-opened by a resume: what was said so far (its last messages, up to
    RESUMED_MESSAGES_SHOWN; `left_out` earlier ones), shown before the next turn."""

    run_id: str
    step: str
    earlier: tuple[Said, ...]
    left_out: int = 0

    @classmethod
    def from_turns(cls, run_id: str, step: str, turns: list[Turn]) -> ConversationResumed:
        said: list[Said] = []
        for turn in turns:
            if turn.role == "assistant" and turn.content.strip():
                said.append(Said("agent", turn.content, "", turn.interrupted, turn.cut))
            elif turn.role == "user" and turn.speaker not in ("", PERSON):
                said.append(Said("partner", turn.content, turn.speaker))
            elif turn.role == "user":  # the first is the step's prompt, then the person
                first = not turn.speaker and not any(s.role in ("prompt", "person") for s in said)
                said.append(Said("prompt" if first else "person", turn.content))
        shown = said[-RESUMED_MESSAGES_SHOWN:]
        return cls(run_id, step, tuple(shown), len(said) - len(shown))


@dataclass(frozen=True, slots=True)
class AwaitingInput:
    """The run is waiting for the person to answer (show the prompt / enable the text box)."""

    run_id: str
    step: str
    prompt: str = "> "


@dataclass(frozen=True, slots=True)
class LogMessage:
    """A `{log: ...}` hook entry, or a note from the engine worth showing."""

    run_id: str
    message: str
    step: str = ""


@dataclass(frozen=True, slots=True)
class RunWarning:
    run_id: str
    message: str
    step: str = ""


@dataclass(frozen=True, slots=True)
class RunError:
    run_id: str
    message: str
    step: str = ""


RunEvent = (
    RunStarted
    | RunFinished
    | StepStarted
    | StepFinished
    | StepOutput
    | TurnStarted
    | AgentText
    | AgentToolUse
    | ToolCallStarted
    | ToolCallFinished
    | AwaitingConfirmation
    | UserMessage
    | TurnFinished
    | ConversationResumed
    | ModelLoading
    | AwaitingInput
    | LogMessage
    | RunWarning
    | RunError
)
