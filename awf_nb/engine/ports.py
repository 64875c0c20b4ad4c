"""The seams between the engine and the world: Provider, InputReader, EventSink, and the
ToolSet of an agent step with tools.

The engine only talks to these protocols; concrete providers (`awf_nb.providers`) and
frontends (`awf_nb.frontends`) implement them and are handed to the engine at run time,
so the engine never imports them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from awf_nb.engine.events import RunEvent
from awf_nb.engine.reply_limits import DEFAULT_MAX_REPLY_BYTES, DEFAULT_MAX_TOOL_CALLS

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState, Turn

# --- what a provider is asked ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asks for, complete (providers assemble streamed pieces).

    `arguments` is the JSON text of the arguments object as the model wrote it (it may be
    invalid JSON: the engine answers that with an error result)."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a history. An assistant message that called tools carries them in
    `tool_calls` (its `content` may be empty); each `tool` message answers one call
    (`tool_call_id`, and the tool's `name`) and always follows its assistant message."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """An MCP server over stdio that an agent CLI connects to for this turn (`mcp_proxy`:
    awf serves the step's tools through `awf mcp-serve`). CLI providers pass it with their
    own MCP flags; other providers ignore it."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class TurnRequest:
    """One agent turn.

    History-based providers send `[system] + history + prompt`. Session-id providers pass
    `session_id` to their resume flag when it is set and ignore `history`; when they have
    no id but `history` is not empty they replay it in the prompt.
    `system_prompt` is None on turns that must not resend it (resumed session-id turns).
    """

    prompt: str
    system_prompt: str | None = None
    history: list[Message] = field(default_factory=list)
    session_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    working_dir: Path = field(default_factory=Path.cwd)
    timeout: float | None = None
    output_format: str = ""
    step: str = ""
    run_id: str = ""
    # 1-based number of this turn within the step's conversation, counting turns restored by
    # `awf resume` (not those inherited through continue_from).
    turn_number: int = 1
    # Who is speaking: "" for the step's own agent; a conversation partner's name (an agent
    # answering the step's agent, or a simulated user) for the partner's turns.
    speaker: str = ""
    env: dict[str, str] = field(default_factory=dict)  # extra environment for CLI agents
    # The tools the model may call (chat mode); providers send them in their API's form.
    tools: list[ToolSpec] = field(default_factory=list)
    # True for a tool round: `history` ends with the tool results and there is no new user
    # message (`prompt` is ""); the model carries on from the results.
    continues: bool = False
    # Agent CLIs: MCP servers to connect to (the step's `mcp_proxy`).
    mcp_servers: list[McpServerSpec] = field(default_factory=list)
    # What the reply may stream (engine/reply_limits.py): the engine holds every reply to
    # these; a provider that gathers pieces before it yields an event holds them to them.
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    # Agents that ask before they act (ACP's session/request_permission): the step's
    # confirm policy answers — `(call_id, tool name, arguments as JSON text)` -> allowed
    # (the person asked, `--yes`, or refused when nobody can be asked).
    ask_permission: Callable[[str, str, str], Awaitable[bool]] | None = None


# --- what a provider answers (in this order: deltas/tools/usage/session…, then Final) --------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool an agent CLI ran inside its own turn (shown, not answered by the engine)."""

    name: str
    argument: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class SessionId:
    session_id: str


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know about this turn (a retry, a context truncation)."""

    message: str
    truncated_turns: int = 0  # pairs dropped to fit the context window


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """The provider loads its model before it can answer (a local model's first turn in the
    process): sent with `done=False` when loading starts, then `done=True` once it is ready
    (after `seconds`). Frontends show it, so a long load is not a blank screen."""

    model: str
    done: bool = False
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Final:
    text: str
    # The reply reached its length limit (`max_tokens`) and was cut there: the model did
    # not finish what it was saying. Frontends mark it.
    cut: bool = False


ProviderEvent = TextDelta | ToolUse | ToolCall | Usage | SessionId | Notice | ModelLoad | Final


@runtime_checkable
class Provider(Protocol):
    """Runs agent turns for one provider name, for the lifetime of one run.

    `session_kind` tells the engine how conversations continue: "history" (the whole
    message list is resent each turn) or "session_id" (the agent keeps the conversation
    and is resumed by id). `stream` must be cancellable: cancelling the consuming task (or
    closing the generator) stops the work (closes the HTTP stream, kills the process
    group, stops generation) promptly. Failures raise `awf_nb.errors.ProviderError`.
    """

    # read-only: a wrapper (recording, seeding) answers with its inner provider's
    @property
    def name(self) -> str: ...

    @property
    def session_kind(self) -> Literal["history", "session_id"]: ...

    def stream(self, turn: TurnRequest) -> AsyncIterator[ProviderEvent]: ...

    async def aclose(self) -> None: ...


# Creates the provider for a name, once per run (closed when the run ends).
# Raises `awf_nb.errors.UserError` for an unknown provider name.
ProviderFactory = Callable[[str], Provider]


@runtime_checkable
class InputReader(Protocol):
    """Where a conversation's next user message comes from.

    Returns the message, or None at end of input. Must be cancellable: a pending read is
    abandoned promptly (< 100 ms) when its task is cancelled.
    """

    async def read(self, prompt: str) -> str | None: ...


@runtime_checkable
class Confirmer(Protocol):
    """An input reader that can also ask the person to allow a tool call (terminal: a
    `y/n` prompt; notebook: Allow / Deny buttons). True allows, False refuses; None means
    no answer (end of input): refused. Must be cancellable like `read`."""

    async def confirm(self, question: str) -> bool | None: ...


@runtime_checkable
class EventSink(Protocol):
    """Receives the run's events on the run's event loop. Must not block."""

    def emit(self, event: RunEvent) -> None: ...


class RunStore(Protocol):
    """Where a run is saved as it goes (awf_nb.store.Store is the one implementation).

    The engine is given one; it never imports the store, which imports the engine's state.
    Transcript lines are written at once and fsynced in groups: `save_state` fsyncs the
    run's transcript first, `sync_transcript` on its own.
    """

    def new_run_id(self) -> str: ...

    def save_state(self, state: RunState) -> None: ...

    def load_state(self, run_id: str) -> RunState: ...

    def record_run(self, state: RunState) -> None: ...

    def append_transcript(self, run_id: str, record: dict[str, Any]) -> int: ...

    def append_turn(self, run_id: str, step: str, turn: Turn, **extra: Any) -> int: ...

    def sync_transcript(self, run_id: str) -> None: ...

    def run_dir(self, run_id: str) -> Path:
        """The run's own folder, private to the user (0700)."""
        ...


# --- tools an agent can call (awf_nb.tools builds them from a step's `tools:` block) ---------


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as a model sees it: `parameters` is the JSON Schema of its arguments object."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns to the model: text, and whether it is an error report."""

    text: str
    is_error: bool = False


# The MCP server serving a CLI agent step's tools (`mcp_proxy`): (the step's `tools:` block
# or None, its `mcp_proxy:` block, working directory, command environment, whether tool
# calls needing confirmation may run, the run's private folder or None) -> the server to
# pass to the CLI.
McpProxyFactory = Callable[[Any, Any, Path, Mapping[str, str], bool, Path | None], McpServerSpec]

# Builds the started tool set of a step's `tools:` block: (config, working directory,
# command environment, the run's masker, where warnings about its tools go) -> ToolSet.
# MCP servers are running when it returns.
ToolSetFactory = Callable[
    [Any, Path, Mapping[str, str], Any, Callable[[str], None]], Awaitable["ToolSet"]
]


@runtime_checkable
class ToolSet(Protocol):
    """The tools of one agent step, for the step's lifetime.

    `call` never raises for anything the model can cause: an unknown tool name, bad
    arguments, a failing command or file operation are all results with `is_error=True`,
    which go back to the model. It must be cancellable: cancelling the awaiting task stops
    the running command (its whole process group) promptly. Tool output is already capped
    and secret-masked. `needs_confirmation(name)` says whether the person must approve a
    call first (the step's `confirm` list). `aclose` stops whatever the set started (MCP
    servers); it is safe to call twice.
    """

    def list(self) -> list[ToolSpec]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult: ...

    def needs_confirmation(self, name: str) -> bool: ...

    async def aclose(self) -> None: ...
