"""Scorers: what decides whether one finished run of an eval passed.

Three kinds, each run after the run ends (also when it failed):

- **condition** — the workflow's condition language (`awf_nb.workflow.expr`) over the run:
  `case`, `states`, `status`, `error`, `stopped_by`, `turns`, `tokens`, `inputs`,
  `transcript` (the conversation as text) and `messages` (as a list). Pass or fail.
- **judge** — one provider turn: the prompt (a template over `.case`, `.transcript`,
  `.states`, `.status`, `.error`) is sent with the verdict's format appended
  (`JUDGE_FORMAT`); the score is the number of the answer's one verdict line
  `SCORE: n` (or, for an answer that is a JSON object, its `score` field) and is compared
  with `pass`. Only that line counts, so a number the judged run planted in the
  transcript, which a judge may quote, is not taken for the verdict. Bounded by
  `judge.timeout` and `judge.max_reply_chars`.
- **tools** — a check of the run's tool calls (`tool_calls`: name, arguments, step, in
  the order the agent asked for them): `used`, `not_used`, `sequence` with a `match` mode
  (`sequence_matches`), `args`. Pass or fail, with what did not hold as its detail.
- **command** — a shell command given the run as JSON on stdin: exit 0 passes, another
  exit code fails, the first line of stdout (if any) is the score. Bounded by `timeout`
  and `max_output_bytes`; it runs in its own process group, contained (engine/process.py).

A scorer that cannot decide (a condition that does not evaluate, a judge whose provider
fails or whose answer holds no verdict or several, a score that is not a finite number,
a command that cannot start, times out or prints
too much) is an *error in that cell*, never a crash of the eval. Everything a scorer shows
is masked with the run's secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.engine.summary import format_duration
from awf_nb.errors import AwfError
from awf_nb.evals.model import ScorerSpec

if TYPE_CHECKING:
    from awf_nb.engine.ports import ProviderFactory
    from awf_nb.engine.state import RunState
    from awf_nb.evals.datasets import Case
    from awf_nb.secrets import Masker

# A verdict line: `SCORE:` (any case) starting a line. Its number must be the whole rest
# of the line; a line that starts so and holds anything else is a malformed verdict.
_VERDICT_START = re.compile(r"^[ \t]*score[ \t]*:", re.IGNORECASE | re.MULTILINE)
_VERDICT_LINE = re.compile(
    r"^[ \t]*score[ \t]*:[ \t]*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)[ \t]*$",
    re.IGNORECASE,
)
# What a judge is told after its prompt: the one form of answer that gives a score.
JUDGE_FORMAT = (
    "\n\nEnd your answer with your verdict on a line of its own, in exactly this form "
    "(the number only, nothing else on that line, and no other line starting with SCORE:):\n"
    "SCORE: <number>"
)
# ... or, when the judge's options hold its reply to a JSON Schema (`json_schema`).
JUDGE_JSON_FORMAT = '\n\nGive your verdict as the number in the "score" field of the JSON object.'
EXCERPT_CHARS = 200
ERROR_EXCERPT_CHARS = 80  # of a judge's answer in an error message (its detail has more)
STDERR_TAIL_CHARS = 500
JUDGE_SPEAKER = "judge"


# What a condition scorer reads: the keys of `FinishedRun.data()` (the loader rejects others).
CONDITION_NAMES = (
    "case", "epoch", "run_id", "status", "error", "stopped_by", "turns", "tokens", "inputs",
    "states", "transcript", "messages", "tool_calls", "seconds", "cost",
)  # fmt: skip


@dataclass
class ScoreValue:
    """One scorer's verdict on one run: passed, a score, or an error."""

    passed: bool | None  # None: the scorer failed to decide (see `error`)
    score: float | None = None
    error: str = ""
    detail: str = ""  # what the judge answered, the command's stderr tail
    tokens: int = 0  # a judge's tokens
    cost: float | None = None  # a judge's cost in USD (with `pricing:`)
    retries: int = 0  # a judge's answers that could not be read and were asked again
    criteria: list[dict[str, Any]] = field(default_factory=list)  # {criterion, passed, reason}
    samples: list[dict[str, Any]] = field(default_factory=list)  # `samples: N`: each's verdict

    @property
    def outcome(self) -> str:
        return "error" if self.passed is None else "pass" if self.passed else "fail"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"passed": self.passed, "score": self.score}
        if self.error:
            data["error"] = self.error
        if self.detail:
            data["detail"] = self.detail
        if self.tokens:
            data["tokens"] = self.tokens
        if self.cost is not None:
            data["cost"] = self.cost
        if self.retries:
            data["retries"] = self.retries
        if self.criteria:
            data["criteria"] = self.criteria
        if self.samples:
            data["samples"] = self.samples
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreValue:
        return cls(
            passed=data.get("passed"),
            score=data.get("score"),
            error=str(data.get("error", "")),
            detail=str(data.get("detail", "")),
            tokens=int(data.get("tokens", 0) or 0),
            cost=data.get("cost"),
            retries=int(data.get("retries", 0) or 0),
            criteria=list(data.get("criteria") or []),
            samples=list(data.get("samples") or []),
        )


@dataclass
class FinishedRun:
    """A finished run as scorers see it (its state is already masked by the run)."""

    case: Case
    epoch: int
    state: RunState
    masker: Masker
    messages: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0  # the run's time, as its row shows it
    cost: float | None = None  # USD, with `pricing:` (None: no price known)

    @classmethod
    def of(
        cls,
        case: Case,
        epoch: int,
        state: RunState,
        masker: Masker,
        *,
        seconds: float = 0.0,
        cost: float | None = None,
    ) -> FinishedRun:
        return cls(case, epoch, state, masker, conversation_messages(state), seconds, cost)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        from awf_nb.evals.tool_scorers import tool_calls

        return tool_calls(self.state)

    @property
    def transcript(self) -> str:
        return transcript_text(self.messages)

    @property
    def stopped_by(self) -> str:
        return stopped_by(self.state)

    @property
    def turns(self) -> int:
        return sum(s.conversation.total_turns for s in self.state.steps.values() if s.conversation)

    def data(self) -> dict[str, Any]:
        """The names conditions, judge prompts and commands see (`CONDITION_NAMES`)."""
        state = self.state
        return {
            "case": dict(self.case.row),
            "epoch": self.epoch,
            "run_id": state.run_id,
            "status": state.status,
            "error": state.error,
            "stopped_by": self.stopped_by,
            "turns": self.turns,
            "tokens": state.total_tokens,
            "inputs": dict(state.inputs),
            "states": {name: step.template_view() for name, step in state.steps.items()},
            "transcript": self.transcript,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "seconds": round(self.seconds, 3),
            "cost": self.cost,
        }

    def as_json(self) -> str:
        """What a command scorer reads on stdin (masked)."""
        data = self.data()
        data["case_id"] = self.case.id
        return json.dumps(self.masker.mask_data(data), ensure_ascii=False, default=str)


def conversation_messages(state: RunState) -> list[dict[str, str]]:
    """Every conversation turn of the run, in step order: step, role, speaker, content."""
    messages: list[dict[str, str]] = []
    for name in dict.fromkeys(state.executed):
        step = state.steps.get(name)
        if step is None or step.conversation is None:
            continue
        for turn in step.conversation.turns:
            if turn.role not in ("user", "assistant") or not turn.content:
                continue
            messages.append(
                {
                    "step": name,
                    "role": turn.role,
                    "speaker": turn.speaker,
                    "content": turn.content,
                }
            )
    return messages


def transcript_text(messages: list[dict[str, str]]) -> str:
    """The conversation as a judge reads it: `user: …` / `assistant: …`, one per message."""
    lines: list[str] = []
    steps = {m["step"] for m in messages}
    current = None
    for message in messages:
        if len(steps) > 1 and message["step"] != current:
            current = message["step"]
            lines.append(f"[{current}]")
        who = message["speaker"] or message["role"]
        lines.append(f"{who}: {message['content']}")
    return "\n".join(lines)


def stopped_by(state: RunState) -> str:
    """Why the run's last conversation ended ("" without one)."""
    for name in reversed(state.executed):
        step = state.steps.get(name)
        if step is not None and step.conversation is not None and step.conversation.stopped_by:
            return step.conversation.stopped_by
    return ""


@dataclass
class ScoringContext:
    """What scorers need besides the run: providers for judges, where commands run."""

    providers: ProviderFactory
    cwd: Path
    env: Mapping[str, str]
    base_dir: Path  # the eval file's folder: templates' readFile, commands' paths
    pricing: Mapping[str, Any] = field(default_factory=dict)  # judges' cost (`pricing:`)


async def score(spec: ScorerSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    """The scorer's verdict on `run`; never raises for anything the run or scorer did."""
    try:
        if spec.condition is not None:
            value = _condition(spec.condition, run)
        elif spec.judge is not None:
            from awf_nb.evals.judges import judge_score

            value = await judge_score(spec.name, spec.judge, run, ctx)
        elif spec.judges is not None:
            from awf_nb.evals.judges import panel_score

            value = await panel_score(spec.name, spec.judges, run, ctx)
        elif spec.tools is not None:
            from awf_nb.evals.tool_scorers import check_tools

            value = check_tools(spec.tools, run.tool_calls)
        else:
            assert spec.command is not None
            value = await _command(spec, run, ctx)
    except AwfError as exc:
        value = ScoreValue(None, error=exc.message)
    except Exception as exc:  # a bug must cost one cell, not the eval
        value = ScoreValue(None, error=f"internal error: {type(exc).__name__}: {exc}")
    mask = run.masker.mask
    value.error, value.detail = mask(value.error), mask(value.detail)
    for verdict in value.criteria:
        verdict["reason"] = mask(verdict["reason"])
    return value


def _condition(source: str, run: FinishedRun) -> ScoreValue:
    from awf_nb.workflow import expr

    try:
        passed = expr.parse(source).is_true(run.data())
    except expr.ExprError as exc:
        return ScoreValue(None, error=f"condition {source!r}: {exc}")
    return ScoreValue(passed, 1.0 if passed else 0.0)


def render_case_template(source: str, data: Mapping[str, Any], *, what: str, base_dir: Path) -> str:
    """A template of the eval file rendered over `data` (`.case`, …); errors name `what`."""
    from awf_nb.errors import ExecutionError
    from awf_nb.workflow import template

    if "{{" not in source:
        return source
    try:
        return template.parse(source, name=what).render(data, base_dir=base_dir, name=what)
    except template.TemplateError as exc:
        raise ExecutionError(f"{what}: {exc}") from None


def render_case_value(value: Any, data: Mapping[str, Any], *, what: str, base_dir: Path) -> Any:
    """Every string inside `value` (a provider's options) rendered as `render_case_template`
    renders one; errors name the key (`user.options.base_url`)."""
    if isinstance(value, str):
        return render_case_template(value, data, what=what, base_dir=base_dir)
    if isinstance(value, list):
        return [render_case_value(v, data, what=what, base_dir=base_dir) for v in value]
    if isinstance(value, dict):
        return {
            k: render_case_value(v, data, what=f"{what}.{k}", base_dir=base_dir)
            for k, v in value.items()
        }
    return value


def judge_verdict(answer: str) -> tuple[float | None, str]:
    """The score a judge's answer gives, or None and why it gives none.

    The answer's one line `SCORE: n`; or, for an answer that is a JSON object as a whole
    (a reply held to a JSON Schema), its `score` field. No verdict, several, or a score
    that is not a finite number: no score."""
    stripped = answer.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, dict):
            value = data.get("score")
            if isinstance(value, bool) or not isinstance(value, int | float):
                shown = _excerpt(answer, ERROR_EXCERPT_CHARS)
                return None, f'the judge\'s JSON answer has no number in its "score" field: {shown}'

            return _finite(str(value))
    starts = [m.start() for m in _VERDICT_START.finditer(answer)]
    if not starts:
        return (
            None,
            'the judge\'s answer has no verdict line "SCORE: <number>": '
            + _excerpt(answer, ERROR_EXCERPT_CHARS),
        )
    if len(starts) > 1:
        lines = [answer[i:].split("\n", 1)[0] for i in starts]
        return None, (
            f"the judge's answer has {len(starts)} verdict lines, it must have one: "
            + ", ".join(_excerpt(line, 40) for line in lines[:3])
        )
    line = answer[starts[0] :].split("\n", 1)[0].rstrip("\r")
    match = _VERDICT_LINE.match(line)
    if match is None:
        return (
            None,
            f'the judge\'s verdict line must be "SCORE: <number>", got {_excerpt(line, 60)}',
        )
    return _finite(match.group(1))


def _finite(text: str) -> tuple[float | None, str]:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        return None, f"the judge's score is not a finite number: {_excerpt(text, 40)}"
    return number, ""


async def _command(spec: ScorerSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    from awf_nb.engine.tool_slots import tool_process_slot

    # One of the eval's tool processes: it waits for a slot of their bound (its timeout
    # counts from its start).
    async with tool_process_slot():
        return await _run_command(spec, run, ctx)


async def _run_command(spec: ScorerSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    from awf_nb.engine.process import ProcessGroup, default_shell

    assert spec.command is not None
    timeout = spec.command_timeout
    limit = spec.max_output_bytes
    env = {**ctx.env, "AWF_EVAL_CASE": run.case.id, "AWF_EVAL_EPOCH": str(run.epoch),
           "AWF_RUN_ID": run.state.run_id}  # fmt: skip
    try:
        group = await ProcessGroup.start(
            [default_shell(), "-c", spec.command],
            cwd=ctx.base_dir,
            env=env,
            stdin=True,
            contain=True,  # its background jobs end with it, as a Bash call's do
        )
    except OSError as exc:
        return ScoreValue(None, error=f"command cannot start: {exc.strerror or exc}")
    payload = run.as_json().encode()
    outputs: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    too_much: list[str] = []

    async def feed() -> None:
        stdin = group.process.stdin
        assert stdin is not None
        try:
            stdin.write(payload)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # a grader that does not read its input is fine
        finally:
            with contextlib.suppress(Exception):
                stdin.close()

    async def read(name: str) -> None:
        stream = getattr(group.process, name)
        buffer = outputs[name]
        while chunk := await stream.read(65536):
            buffer.extend(chunk)
            if len(buffer) > limit:
                too_much.append(name)
                await group.stop()
                return

    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(feed(), read("stdout"), read("stderr"))
            code = await group.leader_exit()
    except TimeoutError:
        timed_out = True
    finally:
        await group.close()
    stdout = outputs["stdout"].decode("utf-8", "replace")
    stderr_tail = outputs["stderr"].decode("utf-8", "replace").strip()[-STDERR_TAIL_CHARS:]
    if timed_out:
        return ScoreValue(
            None,
            error=f"command did not finish within {format_duration(timeout)} (timeout)",
            detail=stderr_tail,
        )
    if too_much:
        return ScoreValue(
            None,
            error=f"command printed more than {limit} bytes on {too_much[0]} (max_output_bytes)",
        )
    if code < 0:
        return ScoreValue(None, error=f"command was killed by signal {-code}", detail=stderr_tail)
    if code in (126, 127):
        reason = "was not found" if code == 127 else "could not be executed"
        return ScoreValue(
            None, error=f"command {reason} (exit code {code}): {stderr_tail}", detail=stderr_tail
        )
    first = stdout.split("\n", 1)[0].strip()
    score_value: float | None = None
    if first:
        try:
            score_value = float(first)
        except ValueError:
            score_value = None
        # nan and inf parse, but a mean over them is no figure and JSON cannot hold them
        if score_value is None or not math.isfinite(score_value):
            return ScoreValue(
                None,
                error="the first line of the command's output must be a finite number (the "
                f"score) or empty, got {_excerpt(first, 60)}",
                detail=stderr_tail,
            )
    return ScoreValue(code == 0, score_value, detail=stderr_tail if code else "")


def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` quoted on one line, cut at `limit` characters, safe for a terminal (the
    answer and the output are untrusted: no escape sequence, no bidi control acts)."""
    from awf_nb.safe_text import terminal_safe

    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return terminal_safe(json.dumps(flat, ensure_ascii=False))
