"""What an eval file IS: pydantic models of `*.eval.yaml` (spec: evaluations.md).

An eval runs one workflow over a dataset of cases (rows), each case `epochs` times, and
scores every finished run. These models validate the file in isolation (types, ranges, one
kind per scorer, unique scorer names, the `pass` rule of a judge); the loader
(`loader.py`) turns YAML into them with file:line:col on every problem, and checks what
needs other files (the workflow, the dataset).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from awf_nb.workflow.durations import Duration
from awf_nb.workflow.model import Limits

# A scorer's name becomes a column of the results: a plain name, not one of the columns
# every row already has.
SCORER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
ROW_COLUMNS = frozenset(
    {"case", "epoch", "run_id", "status", "stopped_by", "turns", "tokens", "seconds",
     "passed", "outcome", "error", "error_kind", "scores", "seed", "cost", "judge_cost",
     "tool_calls", "variant"}
)  # fmt: skip

MAX_EPOCHS = 100
MAX_CONCURRENCY = 1000
DEFAULT_CONCURRENCY = 4
DEFAULT_JUDGE_TIMEOUT = 120.0
DEFAULT_COMMAND_TIMEOUT = 60.0
# Bounds of what a scorer may send back: a judge's reply, a command's stdout and stderr.
DEFAULT_JUDGE_REPLY_CHARS = 20_000
DEFAULT_COMMAND_OUTPUT_BYTES = 1 << 20
# How much of a dataset is read at most (overridable per eval: `dataset: {max_rows, max_bytes}`).
DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_BYTES = 64 << 20
# How many runs (cases x epochs) one eval may plan at most (overridable: `max_runs:`).
DEFAULT_MAX_RUNS = 1_000_000
MAX_MAX_RUNS = 100_000_000

SCORER_KINDS = ("condition", "judge", "judges", "command", "tools")

# A variant's name is a column value, a cassette folder and a `--variant` argument: a plain
# name. An eval compares a handful of versions, not a sweep: at most MAX_VARIANTS.
VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_VARIANTS = 32
MAX_VARIANT_SETS = 200  # `set:` paths per variant

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_PASS_RULE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


class _Model(BaseModel):
    # Unknown keys are reported by the loader (as errors, with a did-you-mean) before
    # validation; what reaches the model is known.
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class PassRule(BaseModel):
    """`pass: ">= 4"`: how a judge's number decides pass or fail."""

    op: str
    threshold: float
    # The number as written (`0.00001`, `3.0000001`): shown and stored as is, so the eval's
    # folder holds the rule the user wrote and `--resume` reads back the same one.
    written: str = ""

    @classmethod
    def parse(cls, text: Any) -> PassRule:
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise ValueError(f'pass must be a comparison such as ">= 4", got {text!r}')
        if isinstance(text, int | float):
            raise ValueError(f'pass must be a comparison such as ">= {text:g}", got {text:g}')
        match = _PASS_RULE.match(text)
        if match is None:
            raise ValueError(
                f'pass must be a comparison such as ">= 4" (one of >= > <= < == != and a '
                f"number), got {text!r}"
            )
        threshold = float(match.group(2))
        if not math.isfinite(threshold):
            raise ValueError(f"pass must compare with a finite number, got {text!r}")
        return cls(op=match.group(1), threshold=threshold, written=match.group(2))

    def passes(self, value: float) -> bool:
        return _COMPARISONS[self.op](value, self.threshold)

    @model_serializer
    def _as_text(self) -> str:
        # dumped as it is written (`">= 4"`), so a dumped eval validates again: the
        # eval's folder keeps it for --resume
        return str(self)

    def __str__(self) -> str:
        # repr: the shortest text that reads back as the same float (`:g` rounds)
        number = self.written or repr(self.threshold).removesuffix(".0")
        return f"{self.op} {number}"


class UserSpec(_Model):
    """`user:` — the simulated user playing the person in every case (spec/agents.md §2).

    `persona` is a template over the case (`{{.case.goal}}`)."""

    persona: str = Field(min_length=1)
    provider: str = Field("local", min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    max_turns: int = Field(5, ge=1, le=1000)  # a hard cap on its messages
    # Its first message, sent verbatim (a template over the case), not generated.
    opener: str | None = Field(None, min_length=1)
    # A defective message (empty, written as the assistant, reasoning tags, too long) is
    # generated again up to this many times; still defective: a `simulator` error.
    retries: int = Field(2, ge=0, le=10)
    desired_turns: int | None = Field(None, ge=1, le=1000)  # a goal it is told, not a cap
    max_chars: int = Field(4000, ge=1, le=1_000_000)  # longer is defective
    # The `end_conversation` tool, its structured end signal: "auto" (where the provider
    # takes tools, but the bundled `local` model), true or false.
    end_tool: bool | Literal["auto"] = "auto"

    @model_validator(mode="after")
    def _goal_within_cap(self) -> UserSpec:
        if self.desired_turns is not None and self.desired_turns > self.max_turns:
            raise ValueError(
                f"user.desired_turns ({self.desired_turns}) is a goal within max_turns "
                f"({self.max_turns}), the hard cap: raise max_turns or lower desired_turns"
            )
        return self


DEFAULT_JUDGE_RETRIES = 2
MAX_JUDGE_SAMPLES = 25
# The prompt of a criteria judge that gives none of its own.
DEFAULT_CRITERIA_PROMPT = (
    "Here is a conversation between a user and an assistant.\n\n{{.transcript}}\n\n"
    "Judge the assistant against each criterion below."
)


class JudgeSpec(_Model):
    """`judge:` — an LLM turn over the run.

    A numeric judge (`prompt` and `pass`): its answer's number is compared with `pass`.
    A criteria judge (`criteria: [...]`): its answer is a pass/fail and a one-line
    reason per criterion; it passes when every criterion does (or, with `pass`, when the
    share of criteria passed satisfies it: `pass: ">= 0.75"`). An answer that cannot be
    read is asked again up to `retries` times (each counted). `samples: N` asks N times:
    the score is their mean (the criteria's verdicts by majority), the row keeps each."""

    prompt: str | None = Field(None, min_length=1)
    pass_: PassRule | None = Field(None, alias="pass")
    criteria: list[str] | None = None
    provider: str = Field("local", min_length=1)
    system_prompt: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout: Duration = DEFAULT_JUDGE_TIMEOUT
    max_reply_chars: int = Field(DEFAULT_JUDGE_REPLY_CHARS, ge=1, le=1_000_000)
    retries: int = Field(DEFAULT_JUDGE_RETRIES, ge=0, le=10)
    samples: int = Field(1, ge=1, le=MAX_JUDGE_SAMPLES)

    @field_validator("pass_", mode="before")
    @classmethod
    def _rule(cls, value: Any) -> Any:
        return value if value is None or isinstance(value, PassRule) else PassRule.parse(value)

    @field_validator("criteria")
    @classmethod
    def _criteria(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        if not value:
            raise ValueError("criteria must list at least one criterion")
        for item in value:
            if not item.strip() or "\n" in item.strip() or len(item) > 500:
                raise ValueError(
                    f"each criterion is one line of at most 500 characters, got {item!r}"
                )
        if len(set(value)) != len(value):
            raise ValueError("criteria must be different from each other")
        return value

    @model_validator(mode="after")
    def _kind(self) -> JudgeSpec:
        if self.criteria is None:
            missing = [k for k, v in (("prompt", self.prompt), ("pass", self.pass_)) if v is None]
            if missing:
                raise ValueError(
                    f"a judge needs {' and '.join(missing)} (or criteria: a list to judge "
                    "pass or fail one by one)"
                )
        return self

    @property
    def question(self) -> str:
        """The prompt (a criteria judge without one gets `DEFAULT_CRITERIA_PROMPT`)."""
        return self.prompt if self.prompt is not None else DEFAULT_CRITERIA_PROMPT


MATCH_MODES = ("strict", "in_order", "any_order", "subset", "superset")


class ToolsSpec(_Model):
    """`tools:` — a check of the run's tool calls; every check given must hold.

    `used`: each of these tools was called; `not_used`: none of these was; `sequence`
    with `match` (default `in_order`): the calls' names against the sequence (see
    `scorers.sequence_matches`); `args`: for each tool, some call of it had these
    arguments (each key equal)."""

    used: list[str] = Field(default_factory=list)
    not_used: list[str] = Field(default_factory=list)
    sequence: list[str] | None = None
    match: str = "in_order"
    args: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("match")
    @classmethod
    def _match(cls, value: str) -> str:
        if value not in MATCH_MODES:
            raise ValueError(f'match must be one of {", ".join(MATCH_MODES)}, got "{value}"')
        return value

    @model_validator(mode="after")
    def _something(self) -> ToolsSpec:
        if not (self.used or self.not_used or self.sequence is not None or self.args):
            raise ValueError("tools needs at least one of used, not_used, sequence, args")
        if "match" in self.model_fields_set and self.sequence is None:
            raise ValueError("tools.match applies to tools.sequence, which is not given")
        return self


class ScorerSpec(_Model):
    """One scorer: exactly one of `condition`, `judge`, `command`, `tools`."""

    name: str
    condition: str | None = None
    judge: JudgeSpec | None = None
    command: str | None = None
    tools: ToolsSpec | None = None
    # Several judges of one question: their verdicts' majority, their scores' mean, and
    # how much they agree.
    judges: list[JudgeSpec] | None = None
    # `command` only: how long it may run and how much it may print.
    timeout: Duration = None
    max_output_bytes: int = Field(DEFAULT_COMMAND_OUTPUT_BYTES, ge=1, le=64 << 20)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SCORER_NAME.match(value):
            raise ValueError(
                f"scorer name {value!r} must start with a letter or _ and hold only letters, "
                "digits, _ and - (64 characters at most): it names a column of the results"
            )
        if value in ROW_COLUMNS:
            raise ValueError(
                f'scorer name "{value}" is already a column of every result row; '
                "choose another name"
            )
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ScorerSpec:
        kinds = [k for k in SCORER_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            given = f"got {' and '.join(kinds)}" if kinds else "got none"
            raise ValueError(
                f'scorer "{self.name}" needs exactly one of condition, judge, judges, command, '
                f"tools ({given})"
            )
        if self.judges is not None and len(self.judges) < 2:
            raise ValueError(f'scorer "{self.name}": judges lists two or more (else use judge)')
        if self.timeout is not None and self.command is None:
            raise ValueError(
                f'scorer "{self.name}": timeout applies to a command scorer '
                "(a judge takes judge.timeout)"
            )
        return self

    @property
    def kind(self) -> str:
        return next(k for k in SCORER_KINDS if getattr(self, k) is not None)

    @property
    def command_timeout(self) -> float:
        return DEFAULT_COMMAND_TIMEOUT if self.timeout is None else float(self.timeout)


class DatasetSpec(_Model):
    """`dataset: {path, max_rows, max_bytes}` (or just the path)."""

    path: str = Field(min_length=1)
    max_rows: int = Field(DEFAULT_MAX_ROWS, ge=1, le=10_000_000)
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1, le=1 << 34)


class Price(_Model):
    """One model's price: USD per million input and output tokens."""

    input: float = Field(ge=0, le=1_000_000)
    output: float = Field(ge=0, le=1_000_000)


class VariantSpec(_Model):
    """One version under comparison (`variants: {NAME: {...}}`): the eval's workflow as it
    is (`{}`), another workflow file, values set by path into the workflow
    (`set: {states.chat.options.model: qwen2.5-7b}`), other inputs — or several of these."""

    description: str = ""
    workflow: str | None = Field(None, min_length=1)
    # "states.chat.options.model" -> value: applied to the workflow's YAML before it loads
    set: dict[str, Any] = Field(default_factory=dict, max_length=MAX_VARIANT_SETS)
    inputs: dict[str, Any] = Field(default_factory=dict)  # over the eval's `inputs:`


DEFAULT_PAIRWISE_PROMPT = (
    "Two conversations follow between a user and an assistant, on the same request.\n\n"
    "Conversation A:\n{{.a}}\n\nConversation B:\n{{.b}}\n\n"
    "In which conversation did the assistant help the user better?"
)


class PairwiseSpec(_Model):
    """`pairwise:` — with variants, a judge shown both conversations of a (case, epoch)
    (`{{.a}}` and `{{.b}}` in its prompt, besides `{{.case.…}}`) asked which is better,
    twice with the positions swapped: a win counts only when both orders agree."""

    prompt: str = Field(DEFAULT_PAIRWISE_PROMPT, min_length=1)
    provider: str = Field("local", min_length=1)
    system_prompt: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout: Duration = DEFAULT_JUDGE_TIMEOUT
    max_reply_chars: int = Field(DEFAULT_JUDGE_REPLY_CHARS, ge=1, le=1_000_000)
    retries: int = Field(DEFAULT_JUDGE_RETRIES, ge=0, le=10)


class EvalLimits(Limits):
    """The eval's `limits:` per run: the workflow's own (the smaller wins) and
    `max_cost`, the most a run may cost in USD (priced with `pricing:`); and one across
    the eval's runs in one process: `max_tool_processes`, the most tool processes (Bash
    and command tool calls, command partners, command scorers) alive at once (default:
    twice the CPUs, at least 4 — `engine.tool_slots.default_tool_processes`)."""

    max_cost: float | None = Field(default=None, gt=0)
    max_tool_processes: int | None = Field(default=None, ge=1, le=100_000)


class EvalFile(_Model):
    """A whole `*.eval.yaml`."""

    workflow: str = Field(min_length=1)
    dataset: DatasetSpec
    description: str = ""
    inputs: dict[str, Any] = Field(default_factory=dict)
    user: UserSpec | None = None
    scorers: list[ScorerSpec] = Field(default_factory=list)
    epochs: int = Field(1, ge=1, le=MAX_EPOCHS)
    concurrency: int = Field(DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    max_runs: int = Field(DEFAULT_MAX_RUNS, ge=1, le=MAX_MAX_RUNS)
    limits: EvalLimits = Field(default_factory=EvalLimits)
    # USD per million tokens, by "provider/model", "model", "provider" or "default".
    pricing: dict[str, Price] = Field(default_factory=dict)
    budget: float | None = Field(None, gt=0)  # USD for the whole eval: no new run past it
    yes: bool = False
    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    # `gate:` — the CI answer (evals/gates.py): each a line such as 'passed >= 80%'
    gate: list[Any] = Field(default_factory=list)
    # `variants:` — versions run on the same cases, epochs and seeds, compared pairwise
    # (the first listed is the baseline the others are compared with)
    # (names and `set` paths are checked with the workflow: evals/variants.py)
    variants: dict[str, VariantSpec] = Field(default_factory=dict, max_length=MAX_VARIANTS)
    # `pairwise:` — a judge of each (case, epoch)'s two conversations, every variant
    # against the first (evals/pairwise.py)
    pairwise: PairwiseSpec | None = None

    @field_validator("gate")
    @classmethod
    def _gates(cls, value: list[Any]) -> list[Any]:
        from awf_nb.evals.gates import Gate

        for one in value:
            Gate.parse(one)  # a ValueError is a located error of the file
        return value

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value


def duplicate_scorer_names(scorers: list[ScorerSpec]) -> list[tuple[int, str]]:
    """(index, name) of each scorer whose name an earlier one already has."""
    seen: set[str] = set()
    found: list[tuple[int, str]] = []
    for index, scorer in enumerate(scorers):
        if scorer.name in seen:
            found.append((index, scorer.name))
        seen.add(scorer.name)
    return found
