"""Scorers: what decides whether one finished run of an eval passed.

Three kinds, each run after the run ends (also when it failed):

- **condition** — the workflow's condition language (`awf_nb.workflow.expr`) over the run:
  `case`, `states`, `status`, `error`, `stopped_by`, `turns`, `tokens`, `inputs`,
  `transcript` (the conversation as text) and `messages` (as a list). Pass or fail.
- **judge** — one provider turn: the prompt (a template over `.case`, `.transcript`,
  `.states`, `.status`, `.error`) is sent, the answer is parsed as a number (its first
  one) and compared with `pass`. Bounded by `judge.timeout` and `judge.max_reply_chars`.
- **command** — a shell command given the run as JSON on stdin: exit 0 passes, another
  exit code fails, the first line of stdout (if any) is the score. Bounded by `timeout`
  and `max_output_bytes`; it runs in its own process group (engine/process.py).

A scorer that cannot decide (a condition that does not evaluate, a judge whose provider
fails or whose answer holds no number, a command that cannot start, times out or prints
too much) is an *error in that cell*, never a crash of the eval. Everything a scorer shows
is masked with the run's secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import AwfError
from awf_nb.evals.model import JudgeSpec, ScorerSpec

if TYPE_CHECKING:
    from awf_nb.engine.ports import ProviderFactory
    from awf_nb.engine.state import RunState
    from awf_nb.evals.datasets import Case
    from awf_nb.secrets import Masker

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)")
EXCERPT_CHARS = 200
STDERR_TAIL_CHARS = 500
JUDGE_SPEAKER = "judge"


@dataclass
class ScoreValue:
    """One scorer's verdict on one run: passed, a score, or an error."""

    passed: bool | None  # None: the scorer failed to decide (see `error`)
    score: float | None = None
    error: str = ""
    detail: str = ""  # what the judge answered, the command's stderr tail
    tokens: int = 0  # a judge's tokens

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
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreValue:
        return cls(
            passed=data.get("passed"),
            score=data.get("score"),
            error=str(data.get("error", "")),
            detail=str(data.get("detail", "")),
            tokens=int(data.get("tokens", 0) or 0),
        )


@dataclass
class FinishedRun:
    """A finished run as scorers see it (its state is already masked by the run)."""

    case: Case
    epoch: int
    state: RunState
    masker: Masker
    messages: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def of(cls, case: Case, epoch: int, state: RunState, masker: Masker) -> FinishedRun:
        return cls(case, epoch, state, masker, conversation_messages(state))

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
        """The names conditions, judge prompts and commands see."""
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


async def score(spec: ScorerSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    """The scorer's verdict on `run`; never raises for anything the run or scorer did."""
    try:
        if spec.condition is not None:
            value = _condition(spec.condition, run)
        elif spec.judge is not None:
            value = await _judge(spec.name, spec.judge, run, ctx)
        else:
            assert spec.command is not None
            value = await _command(spec, run, ctx)
    except AwfError as exc:
        value = ScoreValue(None, error=exc.message)
    except Exception as exc:  # a bug must cost one cell, not the eval
        value = ScoreValue(None, error=f"internal error: {type(exc).__name__}: {exc}")
    mask = run.masker.mask
    value.error, value.detail = mask(value.error), mask(value.detail)
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


async def _judge(name: str, spec: JudgeSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    from awf_nb.engine.ports import Final, TextDelta, TurnRequest, Usage

    data = {**run.data(), "env": dict(ctx.env)}
    prompt = render_case_template(
        spec.prompt, data, what=f"scorer {name}: judge.prompt", base_dir=ctx.base_dir
    )
    system = (
        render_case_template(
            spec.system_prompt, data, what=f"scorer {name}: judge.system_prompt",
            base_dir=ctx.base_dir,
        )
        if spec.system_prompt is not None
        else None
    )  # fmt: skip
    where = f"scorer {name}: judge"
    # Provider and options are templates, as a step's are (`api_key: "{{.env.KEY}}"`).
    provider_name = render_case_template(
        spec.provider, data, what=f"{where}.provider", base_dir=ctx.base_dir
    ).strip()
    options = render_case_value(spec.options, data, what=f"{where}.options", base_dir=ctx.base_dir)
    run.masker.add_option_secrets(options)
    turn = TurnRequest(
        prompt=prompt,
        system_prompt=system,
        options=options,
        working_dir=ctx.cwd,
        timeout=spec.timeout,
        step=f"score.{name}",
        run_id=run.state.run_id,
        speaker=JUDGE_SPEAKER,
    )
    provider = ctx.providers(provider_name)
    pieces: list[str] = []
    size = 0
    final: str | None = None
    tokens = 0
    events = provider.stream(turn)
    try:
        async with asyncio.timeout(spec.timeout):
            async for event in events:
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                    size += len(event.text)
                    if size > spec.max_reply_chars:
                        return ScoreValue(
                            None,
                            error=f"the judge's answer is longer than {spec.max_reply_chars} "
                            "characters (judge.max_reply_chars)",
                            tokens=tokens,
                        )
                elif isinstance(event, Usage):
                    tokens += event.input_tokens + event.output_tokens
                elif isinstance(event, Final):
                    final = event.text
    except TimeoutError:
        return ScoreValue(
            None, error=f"the judge did not answer within {spec.timeout:g}s (judge.timeout)"
        )
    finally:
        with contextlib.suppress(Exception):
            await events.aclose()  # type: ignore[attr-defined]
    answer = final if final is not None else "".join(pieces)
    shown = _excerpt(answer)
    match = _NUMBER.search(answer)
    if match is None:
        return ScoreValue(
            None, error=f"the judge's answer holds no number: {shown}", detail=shown, tokens=tokens
        )
    number = float(match.group(0))
    return ScoreValue(spec.pass_.passes(number), number, detail=shown, tokens=tokens)


async def _command(spec: ScorerSpec, run: FinishedRun, ctx: ScoringContext) -> ScoreValue:
    from awf_nb.engine.process import ProcessGroup, default_shell

    assert spec.command is not None
    timeout = spec.command_timeout
    limit = spec.max_output_bytes
    env = {**ctx.env, "AWF_EVAL_CASE": run.case.id, "AWF_EVAL_EPOCH": str(run.epoch),
           "AWF_RUN_ID": run.state.run_id}  # fmt: skip
    try:
        group = await ProcessGroup.start(
            [default_shell(), "-c", spec.command], cwd=ctx.base_dir, env=env, stdin=True
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
            None, error=f"command did not finish within {timeout:g}s (timeout)", detail=stderr_tail
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
            return ScoreValue(
                None,
                error="the first line of the command's output must be a number (the score) "
                f"or empty, got {_excerpt(first)}",
                detail=stderr_tail,
            )
    return ScoreValue(code == 0, score_value, detail=stderr_tail if code else "")


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > EXCERPT_CHARS:
        flat = flat[: EXCERPT_CHARS - 1] + "…"
    return json.dumps(flat, ensure_ascii=False)
