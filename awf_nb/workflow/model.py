"""What a workflow IS: pydantic models for every construct of the AWF workflow language.

These models validate one step or one workflow in isolation (field types, enums, mutually
exclusive fields). Cross-step checks (references, reachability, template references) live
in `checks.py`; turning YAML text into these models, with file:line:col on every error,
lives in the `loader` package. Field names follow the YAML keys; `while` is `while_` in Python.

Models allow extra keys (`extra="allow"`) so the loader can report each unknown key as a
warning with a did-you-mean suggestion instead of failing, as AWF ignores them.

Why one module: it is the language's schema, read top to bottom like the spec (inputs,
the parts steps share, each step kind, the workflow); the step kinds refer to the shared
parts and the workflow to every kind, so a split would only scatter one picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from awf_nb.errors import Problem
from awf_nb.workflow.durations import Duration
from awf_nb.workflow.tools_model import McpProxyConfig, ToolsConfig

# --- scalar helpers ------------------------------------------------------------------------


# Canonical step kinds, and the YAML spellings accepted for each (case-insensitive).
STEP_KINDS: dict[str, str] = {
    "step": "command",
    "command": "command",
    "agent": "agent",
    "terminal": "terminal",
    "parallel": "parallel",
    "for_each": "for_each",
    "while": "while",
    "call_workflow": "call_workflow",
    "operation": "operation",
}

STATE_PROPERTIES = (
    "Output",
    "Stderr",
    "ExitCode",
    "Status",
    "Response",
    "JSON",
    "TokensUsed",
    "TokensInput",
    "TokensOutput",
    "TokensEstimated",
    "Conversation",
    "Visit",
    "Visits",
)


def canonical_kind(type_name: Any) -> str | None:
    """Map a YAML `type:` value to its canonical step kind, or None when unknown."""
    if not isinstance(type_name, str):
        return None
    return STEP_KINDS.get(type_name.strip().lower())


class _Model(BaseModel):
    # Built on first use, not at import: a command that loads one workflow builds only the
    # models that workflow's steps need (start-up time of every `awf` command).
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


# --- inputs --------------------------------------------------------------------------------


class InputValidation(_Model):
    pattern: str | None = None
    enum: list[Any] | None = None
    min: float | None = None
    max: float | None = None
    file_exists: bool = False
    file_extension: list[str] | None = None

    @field_validator("file_extension", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("pattern")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            from awf_nb.workflow.patterns import PatternError, compile_pattern

            try:
                compile_pattern(value)
            except PatternError as exc:
                raise ValueError(str(exc)) from None
        return value


class Input(_Model):
    name: str
    # string, integer, boolean, number, array, object; another name is accepted with a
    # warning (AWF does not check types) and handled as a string.
    type: str = "string"
    description: str = ""
    required: bool = False
    default: Any = None
    validation: InputValidation | None = None
    # True/False overrides the naming rule (awf_nb.secrets.is_secret_name) for this input.
    secret: bool | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            aliases = {"int": "integer", "bool": "boolean", "str": "string", "float": "number",
                       "list": "array", "map": "object"}  # fmt: skip
            return aliases.get(value, value)
        return value


# --- shared step parts ---------------------------------------------------------------------


class HookAction(_Model):
    """One hook entry: `{log: text}` or `{command: shell}`."""

    log: str | None = None
    command: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> HookAction:
        if (self.log is None) == (self.command is None):
            raise ValueError("a hook needs exactly one of 'log' or 'command'")
        return self


class StepHooks(_Model):
    pre: list[HookAction] = Field(default_factory=list)
    post: list[HookAction] = Field(default_factory=list)


class WorkflowHooks(_Model):
    workflow_start: list[HookAction] = Field(default_factory=list)
    workflow_end: list[HookAction] = Field(default_factory=list)
    workflow_error: list[HookAction] = Field(default_factory=list)
    workflow_cancel: list[HookAction] = Field(default_factory=list)


class RetryPolicy(_Model):
    max_attempts: int = 1
    initial_delay: Duration = 1.0
    max_delay: Duration = 60.0
    backoff: str = "exponential"
    multiplier: float = 2.0
    jitter: float = 0.0
    retryable_exit_codes: list[int] = Field(default_factory=list)

    @field_validator("max_attempts")
    @classmethod
    def _attempts(cls, value: int) -> int:
        if value < 1:
            raise ValueError("max_attempts must be >= 1")
        return value

    @field_validator("backoff")
    @classmethod
    def _backoff(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("constant", "linear", "exponential"):
            raise ValueError("invalid backoff strategy")
        return value

    @field_validator("jitter")
    @classmethod
    def _jitter(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("jitter must be between 0.0 and 1.0")
        return value

    @field_validator("multiplier")
    @classmethod
    def _multiplier(cls, value: float) -> float:
        if value < 0:
            raise ValueError("multiplier must be >= 0")
        return value

    def delay_before(self, attempt: int) -> float:
        """Seconds to wait before attempt number `attempt` (2 = first retry), no jitter."""
        n = max(attempt - 1, 1)
        base = self.initial_delay or 0.0
        if self.backoff == "constant":
            delay = base
        elif self.backoff == "linear":
            delay = base * n
        else:
            delay = base * (self.multiplier ** (n - 1))
        return min(delay, self.max_delay if self.max_delay is not None else delay)


class Transition(_Model):
    when: str | None = None
    goto: str


class InlineFailure(_Model):
    """`on_failure: {message: ..., status: N}`: fail the run right here with this message."""

    message: str = ""
    status: int = Field(1, ge=1, le=255)  # a process exit code: 1-255 (0 would mean success)


class _StepBase(_Model):
    name: str = ""  # filled in by the loader from the mapping key
    description: str = ""
    timeout: Duration = None
    on_success: str | None = None
    on_failure: str | InlineFailure | None = None
    transitions: list[Transition] = Field(default_factory=list)
    continue_on_error: bool = False
    hooks: StepHooks = Field(default_factory=StepHooks)
    retry: RetryPolicy | None = None
    # Pause here when the run is interactive or given --breakpoints (docs/debugging.md).
    breakpoint: Literal["before", "after"] | None = None

    @field_validator("type", mode="before", check_fields=False)
    @classmethod
    def _canonical_type(cls, value: Any) -> Any:
        return canonical_kind(value) or value

    def successors(self) -> list[str]:
        """Every step this one can lead to, in order: what it runs inside (parallel
        branches, a loop body), then its routes. The one definition of the step graph,
        for checks, plans and diagrams."""
        names = [self.on_success] if self.on_success else []
        if isinstance(self.on_failure, str):
            names.append(self.on_failure)
        names.extend(t.goto for t in self.transitions)
        return names


# --- step kinds ----------------------------------------------------------------------------


class CommandStep(_StepBase):
    type: Literal["command"] = "command"
    command: str | None = None
    script_file: str | None = None
    dir: str | None = None

    @model_validator(mode="after")
    def _command_xor_script(self) -> CommandStep:
        if self.command and self.script_file:
            raise ValueError("command and script_file are mutually exclusive")
        if not self.command and not self.script_file:
            raise ValueError("either command or script_file is required for command-type steps")
        return self


MAX_PARTNER_TURNS = 1000


MAX_PARTNER_OUTPUT_BYTES = 1 << 20


class Partner(_Model):
    """`conversation.with`: who answers the step's agent — the person (the default), another
    agent (`provider`, its own system prompt, options and session), scripted `replies`, or
    a `command` (a script given the exchange as JSON on stdin; its stdout is the answer)."""

    kind: Literal["person", "agent", "replies", "command"] = "person"
    name: str = "partner"  # the label in frontends and transcripts
    provider: str | None = None
    system_prompt: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    # A role (AGENTS.md) put before the partner's system prompt, as a step's `role:`.
    role: str | None = None
    # What the partner is sent each time; by default the agent's reply verbatim.
    prompt: str | None = None
    replies: list[str] | None = None
    command: str | None = None  # a shell command (a template)
    # For a command: how long one answer may take (default: the step's timeout), and how
    # much it may print (stdout and stderr together) before it is stopped.
    timeout: Duration = None
    max_output_bytes: int = Field(default=MAX_PARTNER_OUTPUT_BYTES, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() == "person"):
            return {"kind": "person", "name": "person"}
        if isinstance(value, str):
            raise ValueError(
                f"conversation.with must be `person` or a map with provider (another agent) "
                f"or replies (scripted messages), got {value!r}"
            )
        if not isinstance(value, dict):
            return value
        value = {k: v for k, v in value.items() if k != "kind"}
        given = [key for key in ("provider", "replies", "command") if key in value]
        if len(given) > 1:
            raise ValueError(
                "conversation.with takes one of provider, replies or command, not "
                + " and ".join(given)
            )
        if not given:
            raise ValueError(
                "conversation.with needs provider (another agent answers), replies "
                "(scripted messages) or command (a script answers); `with: person` is the "
                "person at the keyboard"
            )
        agent_only = [k for k in ("system_prompt", "options", "prompt", "role") if k in value]
        if given[0] != "provider" and agent_only:
            raise ValueError(
                f"conversation.with: {', '.join(agent_only)} only apply to an agent partner "
                "(provider)"
            )
        command_only = [k for k in ("timeout", "max_output_bytes") if k in value]
        if given[0] != "command" and command_only:
            raise ValueError(
                f"conversation.with: {', '.join(command_only)} only apply to a command partner"
            )
        value["kind"] = {"provider": "agent", "replies": "replies", "command": "command"}[given[0]]
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("conversation.with.name must not be empty")
        return value

    @field_validator("replies", mode="before")
    @classmethod
    def _replies(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [v if isinstance(v, str) else str(v) for v in value]
        return value

    @property
    def is_person(self) -> bool:
        return self.kind == "person"


class ConversationConfig(_Model):
    """Session tracking: `conversation: {}` records the session; `continue_from` resumes one.

    With a partner other than the person (`with`), `until` (a condition) and `max_turns`
    (required) bound the exchange between the two sides."""

    continue_from: str | None = None
    with_: Partner | None = Field(default=None, alias="with")
    until: str | None = None
    max_turns: int | None = None

    @property
    def partner(self) -> Partner | None:
        """The non-person partner, or None when the person answers."""
        return None if self.with_ is None or self.with_.is_person else self.with_

    @model_validator(mode="after")
    def _bounds(self) -> ConversationConfig:
        if self.partner is None:
            return self  # the loader reports max_turns / until without a partner
        if self.max_turns is None:
            raise ValueError(
                "conversation.max_turns is required when another agent or scripted replies "
                f"answer (an exchange without a person must end), 1-{MAX_PARTNER_TURNS}"
            )
        if not 1 <= self.max_turns <= MAX_PARTNER_TURNS:
            raise ValueError(
                f"conversation.max_turns must be between 1 and {MAX_PARTNER_TURNS}, "
                f"got {self.max_turns}"
            )
        return self


class SkillPath(_Model):
    """`skills: [{path: ./dir}]`: a skill by its folder rather than by name."""

    path: str


def _skill_refs(value: Any) -> Any:
    """AWF's checks of a `skills:` list (its messages): names, or maps with a `path`."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("skills must be a list of skill names or {path: ...} maps")
    refs: list[Any] = []
    mistakes: list[str] = []  # every bad entry at once, not the first alone
    for i, item in enumerate(value):
        try:
            refs.append(skill_ref(item))
        except ValueError as exc:
            mistakes.append(f"skill[{i}]: {exc}")
    if mistakes:
        raise ValueError("; ".join(mistakes))
    return refs


def skill_ref(item: Any) -> str | SkillPath:
    """One entry of a `skills:` list: a name, or a `{path: …}` map. Raises ValueError."""
    if isinstance(item, str):
        if not item.strip():
            raise ValueError("empty skill name")
        return item
    if isinstance(item, dict):
        if "path" not in item:
            raise ValueError("map must have 'path' key")
        if not isinstance(item["path"], str) or not item["path"].strip():
            raise ValueError("path must be a non-empty string")
        if len(item) > 1:
            others = ", ".join(sorted(str(k) for k in item if k != "path"))
            raise ValueError(f"unknown key(s) {others}; a map takes only 'path'")
        return SkillPath(path=item["path"])
    raise ValueError("invalid type")


class AgentStep(_StepBase):
    type: Literal["agent"] = "agent"
    provider: str
    mode: str = "single"
    prompt: str | None = None
    prompt_file: str | None = None
    system_prompt: str | None = None
    # A persona (an AGENTS.md found by name or path; a template) put before system_prompt.
    role: str | None = None
    # Knowledge (SKILL.md files) put before the prompt, in `<skill_content>` blocks.
    skills: list[str | SkillPath] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    output_format: str = ""
    conversation: ConversationConfig | None = None
    # Tools the model may call (chat mode: openai_compatible, local, scripted); for agent
    # CLIs, `mcp_proxy` serves them through `awf mcp-serve`.
    tools: ToolsConfig | None = None
    mcp_proxy: McpProxyConfig | None = None
    timeout: Duration = 300.0  # per agent turn

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if value is None or value == "":
            return "single"
        if isinstance(value, str) and value.strip().lower() in ("single", "conversation"):
            return value.strip().lower()
        raise ValueError("mode must be 'single' or 'conversation'")

    @field_validator("skills", mode="before")
    @classmethod
    def _skills(cls, value: Any) -> Any:
        return _skill_refs(value)

    @field_validator("output_format", mode="before")
    @classmethod
    def _output_format(cls, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, str) and value.strip().lower() in ("", "json", "text"):
            return value.strip().lower()
        raise ValueError("output_format must be 'json', 'text', or empty")

    @field_validator("conversation", mode="before")
    @classmethod
    def _empty_mapping(cls, value: Any) -> Any:
        # `conversation: {}` and a bare `conversation:` (YAML null) both mean "track it".
        return {} if value is None else value

    @model_validator(mode="after")
    def _prompt_rules(self) -> AgentStep:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("prompt and prompt_file are mutually exclusive")
        if self.mode == "conversation":
            if self.prompt_file is not None:
                raise ValueError("prompt_file is not supported in conversation mode")
            if not (self.prompt or "").strip():
                raise ValueError("prompt is required in conversation mode")
        elif self.conversation is not None and self.conversation.partner is not None:
            raise ValueError("conversation.with needs mode: conversation")
        elif not (self.prompt or "").strip() and not self.prompt_file:
            raise ValueError("prompt or prompt_file is required")
        return self

    @property
    def session_tracked(self) -> bool:
        """Whether the step keeps its turns: a conversation, a session a later step may
        continue, or tool calls and their results (RunResult shows them)."""
        return self.conversation is not None or self.mode == "conversation" or bool(self.tools)


class TerminalStep(_StepBase):
    type: Literal["terminal"] = "terminal"
    status: Literal["success", "failure"] = "success"
    message: str = ""

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ParallelStep(_StepBase):
    type: Literal["parallel"] = "parallel"
    parallel: list[str]
    strategy: Literal["all_succeed", "any_succeed", "best_effort"] = "all_succeed"
    max_concurrent: int = Field(default=0, ge=0)

    def successors(self) -> list[str]:
        return [*self.parallel, *super().successors()]


class LoopBase(_StepBase):
    """What for_each and while share: a body of steps run again and again."""

    body: list[str]
    max_iterations: int | str = 100
    break_when: str | None = None
    on_complete: str | None = None

    def successors(self) -> list[str]:
        after = [self.on_complete] if self.on_complete else []
        return [*self.body, *super().successors(), *after]


class ForEachStep(LoopBase):
    type: Literal["for_each"] = "for_each"
    items: str | list[Any]


class WhileStep(LoopBase):
    type: Literal["while"] = "while"
    while_: str = Field(alias="while")


class CallWorkflowStep(_StepBase):
    type: Literal["call_workflow"] = "call_workflow"
    workflow: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)


class OperationStep(_StepBase):
    """`type: operation`: one of the built-in operations (awf_nb/workflow/operations.py)."""

    type: Literal["operation"] = "operation"
    operation: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    operation_inputs: dict[str, Any] = Field(default_factory=dict)  # AWF's other spelling

    @model_validator(mode="after")
    def _known_operation(self) -> OperationStep:
        from awf_nb.workflow.operations import OPERATIONS, input_problems, unknown_operation_message

        if self.operation_inputs and not self.inputs:
            self.inputs = self.operation_inputs
        spec = OPERATIONS.get(self.operation)
        if spec is None:
            raise ValueError(unknown_operation_message(self.operation))
        if problems := input_problems(spec, self.inputs):
            raise ValueError("; ".join(problems))
        return self


STEP_CLASSES: dict[str, type[_StepBase]] = {
    "command": CommandStep,
    "agent": AgentStep,
    "terminal": TerminalStep,
    "parallel": ParallelStep,
    "for_each": ForEachStep,
    "while": WhileStep,
    "call_workflow": CallWorkflowStep,
    "operation": OperationStep,
}


AnyStep = (
    CommandStep
    | AgentStep
    | TerminalStep
    | ParallelStep
    | ForEachStep
    | WhileStep
    | CallWorkflowStep
    | OperationStep
)

if TYPE_CHECKING:
    StepsByName = dict[str, AnyStep]
else:
    # The loader validates each step against its own class, so only the kinds a workflow
    # uses are ever built (the models are built on first use) and each error points into
    # its own step; the workflow then holds the validated steps as they are.
    StepsByName = dict[str, Any]


# --- the workflow --------------------------------------------------------------------------


DEFAULT_VISITS_KEPT = 100
# Of each command's stdout and of its stderr, how many bytes are kept (its beginning and
# end) for `Output`, `Stderr` and the state file.
DEFAULT_OUTPUT_BYTES_KEPT = 4 * 1024 * 1024


class Limits(_Model):
    """`limits:` — a run-level budget for workflows whose agents talk in cycles.

    `max_visits: {step: N}` caps how many times a step may run (a visit: each time it
    starts; its retries are part of it); `visits_kept` how many finished visits of each
    step `{{.states.NAME.Visits}}` keeps (the most recent); `output_bytes_kept` how much
    of each command's stdout and stderr is kept (the first and last halves: the command
    runs on, what lies between is not kept)."""

    max_agent_turns: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout: Duration = None
    max_visits: dict[str, int] = Field(default_factory=dict)
    visits_kept: int = Field(default=DEFAULT_VISITS_KEPT, ge=1, le=10_000)
    output_bytes_kept: int = Field(default=DEFAULT_OUTPUT_BYTES_KEPT, ge=1024, le=1 << 30)

    @field_validator("max_visits")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for step, limit in value.items():
            if limit < 1:
                raise ValueError(f"limits.max_visits.{step} must be >= 1, got {limit}")
        return value

    @property
    def any(self) -> bool:
        bounds = (self.max_agent_turns, self.max_tokens, self.timeout)
        return any(v is not None for v in bounds) or bool(self.max_visits)


class Workflow(_Model):
    """A whole workflow. `initial` and `steps` come from the YAML `states:` mapping."""

    name: str
    version: str | None = None
    description: str = ""
    author: str | None = None
    tags: list[str] = Field(default_factory=list)
    inputs: list[Input] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    initial: str
    steps: StepsByName
    hooks: WorkflowHooks = Field(default_factory=WorkflowHooks)
    limits: Limits = Field(default_factory=Limits)
    # Where it came from (not part of the language): used for relative paths and messages.
    source_path: Path | None = Field(default=None, exclude=True)
    source_dir: Path | None = Field(default=None, exclude=True)  # for YAML given as text
    source_text: str = Field(default="", exclude=True, repr=False)
    # Filled by the loader: non-fatal findings, and the line/column of every YAML path
    # ("states.review.prompt" -> (12, 5)) so run-time errors can point into the file.
    warnings: list[Problem] = Field(default_factory=list, exclude=True, repr=False)
    locations: dict[str, tuple[int, int]] = Field(default_factory=dict, exclude=True, repr=False)
    # Only in a workflow that did not load (`DefinitionError.partial`): the agent steps some
    # field of which could not be read, as written, so `awf validate` still checks the roles
    # and skills they name (`roles_skills.agent_file_problems`).
    unread_steps: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude=True, repr=False)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value

    @property
    def base_dir(self) -> Path:
        if self.source_path is not None:
            return self.source_path.parent
        return self.source_dir or Path.cwd()

    def input(self, name: str) -> Input | None:
        return next((i for i in self.inputs if i.name == name), None)
