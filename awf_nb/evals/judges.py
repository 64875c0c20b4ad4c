"""Judges you can trust: one judge turn, answers read strictly, asked again when unreadable.

- `ask` streams one judge turn, bounded by `judge.timeout` and `judge.max_reply_chars`.
- A **numeric** judge's answer is read by `scorers.judge_verdict` (its `SCORE: n` line).
- A **criteria** judge (`criteria: [...]`) is asked for a JSON verdict per criterion —
  `{"criteria": [{"criterion": 1, "pass": true, "reason": "..."}]}`; the `local` model is
  held to that JSON Schema, other providers are told it and read by a tolerant parser
  (`criteria_verdict`: code fences, text around the object, `"pass"`/`"fail"` words).
- An answer that cannot be read is asked again, with what was wrong, up to
  `judge.retries` times; each retry is counted (`ScoreValue.retries`), apart from errors.
- `samples: N` asks N times: the score is the mean (criteria: each one's majority
  verdict), the row keeps each sample, and `agreement` measures how much they agree
  (Fleiss' kappa over the pass/fail verdicts, with the plain share of agreeing pairs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from awf_nb.engine.summary import format_limit
from awf_nb.errors import AwfError
from awf_nb.evals.scorers import (
    JUDGE_FORMAT,
    JUDGE_JSON_FORMAT,
    JUDGE_SPEAKER,
    FinishedRun,
    ScoreValue,
    ScoringContext,
    _excerpt,
    judge_verdict,
    render_case_template,
    render_case_value,
)

if TYPE_CHECKING:
    from awf_nb.engine.ports import Provider, TurnRequest
    from awf_nb.evals.model import JudgeSpec

REASON_CHARS = 200  # of a criterion's reason, as the row keeps it
# Providers that hold a reply to a JSON Schema given as `options.json_schema`.
SCHEMA_PROVIDERS = frozenset({"local"})
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_WORDS = {"pass": True, "passed": True, "yes": True, "true": True, "met": True}
_WORDS.update({"fail": False, "failed": False, "no": False, "false": False, "not met": False})


@dataclass
class Answer:
    """One judge turn: its text (None when it failed: see `error`) and its tokens."""

    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str = ""


async def ask(provider: Provider, turn: TurnRequest, spec: JudgeSpec) -> Answer:
    """One judge turn, bounded by `spec.timeout` and `spec.max_reply_chars`."""
    from awf_nb.engine.ports import Final, TextDelta, Usage

    pieces: list[str] = []
    size = 0
    final: str | None = None
    answer = Answer(None)
    events = provider.stream(turn)
    try:
        async with asyncio.timeout(spec.timeout):
            async for event in events:
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                    size += len(event.text)
                    if size > spec.max_reply_chars:
                        answer.error = (
                            f"the judge's answer is longer than {spec.max_reply_chars} "
                            "characters (judge.max_reply_chars)"
                        )
                        return answer
                elif isinstance(event, Usage):
                    answer.tokens_in += event.input_tokens
                    answer.tokens_out += event.output_tokens
                elif isinstance(event, Final):
                    final = event.text
    except TimeoutError:
        answer.error = (
            f"the judge did not answer within {format_limit(spec.timeout)} (judge.timeout)"
        )
        return answer
    finally:
        with contextlib.suppress(Exception):
            await events.aclose()  # type: ignore[attr-defined]
    answer.text = final if final is not None else "".join(pieces)
    return answer


def again(turn: TurnRequest, prompt: str, problem: str) -> TurnRequest:
    """The turn that asks a judge again after an answer that could not be read."""
    return dataclasses.replace(
        turn,
        prompt=f"{prompt}\n\nYour previous answer could not be read: {problem}\n"
        "Answer again, exactly in the form asked.",
    )


# --- criteria ------------------------------------------------------------------------------


def criteria_format(criteria: Sequence[str]) -> str:
    """What a criteria judge is told after its prompt: the criteria and the answer's form."""
    listed = "\n".join(f"{n}. {text}" for n, text in enumerate(criteria, 1))
    example = ", ".join(
        f'{{"criterion": {n}, "pass": true, "reason": "one line"}}'
        for n in range(1, min(len(criteria), 2) + 1)
    )
    return (
        f"\n\nCriteria:\n{listed}\n\nFor each criterion, decide whether it is met (pass) or "
        "not (fail), with a one-line reason. Answer with a JSON object only, in exactly "
        f'this form, one entry per criterion, in order:\n{{"criteria": [{example}]}}'
    )


def criteria_schema(count: int) -> dict[str, Any]:
    """The JSON Schema of a criteria verdict (for providers that hold a reply to one)."""
    item = {
        "type": "object",
        "properties": {
            "criterion": {"type": "integer", "minimum": 1, "maximum": count},
            "pass": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["criterion", "pass", "reason"],
    }
    return {
        "type": "object",
        "properties": {
            "criteria": {"type": "array", "items": item, "minItems": count, "maxItems": count}
        },
        "required": ["criteria"],
    }


def criteria_verdict(
    answer: str, criteria: Sequence[str]
) -> tuple[list[dict[str, Any]] | None, str]:
    """Each criterion's verdict in a judge's answer — `{criterion, passed, reason}` in
    the criteria's order — or None and what is wrong with the answer."""
    data = _json_in(answer)
    if data is None:
        return None, "the judge's answer holds no JSON object with a verdict per criterion"
    items: Any = data.get("criteria", data) if isinstance(data, dict) else data
    if isinstance(items, dict):  # {"criterion text or number": {...} or true}
        items = [
            {"criterion": key, **(value if isinstance(value, dict) else {"pass": value})}
            for key, value in items.items()
        ]
    if not isinstance(items, list):
        return None, 'the judge\'s JSON answer has no "criteria" list'
    found: dict[int, dict[str, Any]] = {}
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            return None, f"entry {position + 1} of the judge's criteria is not an object"
        index = _criterion_index(item.get("criterion"), criteria, position)
        if index is None:
            return None, f"the judge's entry {position + 1} names no criterion of the list"
        verdict = _passed(item.get("pass", item.get("passed", item.get("verdict"))))
        if verdict is None:
            return None, (
                f"the judge's verdict on criterion {index + 1} is not pass or fail: "
                f"{json.dumps(item.get('pass'), ensure_ascii=False)}"
            )
        reason = " ".join(str(item.get("reason", "")).split())[:REASON_CHARS]
        found[index] = {"criterion": criteria[index], "passed": verdict, "reason": reason}
    missing = [n for n in range(len(criteria)) if n not in found]
    if missing:
        n = missing[0]
        return None, f'the judge gave no verdict on criterion {n + 1} ("{criteria[n]}")'
    return [found[n] for n in range(len(criteria))], ""


def _json_in(answer: str) -> Any:
    text = _FENCE.sub("", answer.strip())
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = text.find(opening), text.rfind(closing)
        if start != -1 and end > start:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                continue
    return None


def _criterion_index(value: Any, criteria: Sequence[str], position: int) -> int | None:
    if value is None:
        return position if position < len(criteria) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value - 1 if 1 <= value <= len(criteria) else None
    text = str(value).strip()
    if text.isdigit():
        return _criterion_index(int(text), criteria, position)
    for index, criterion in enumerate(criteria):
        if text.lower() == criterion.strip().lower():
            return index
    return None


def _passed(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _WORDS.get(value.strip().lower())
    return None


def criteria_detail(verdicts: Sequence[dict[str, Any]]) -> str:
    """The row's words for a criteria verdict: which failed and why."""
    failed = [v for v in verdicts if not v["passed"]]
    if not failed:
        return f"all {len(verdicts)} criteria met"
    return "failed: " + "; ".join(f'"{v["criterion"]}": {v["reason"] or "-"}' for v in failed)


def majority(samples: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each criterion's verdict by majority over the samples (a tie fails), with the
    reason of the first sample that gave that verdict."""
    merged: list[dict[str, Any]] = []
    for index, first in enumerate(samples[0]):
        votes = [sample[index]["passed"] for sample in samples]
        passed = sum(votes) * 2 > len(votes)
        reason = next(s[index]["reason"] for s in samples if s[index]["passed"] == passed)
        merged.append({"criterion": first["criterion"], "passed": passed, "reason": reason})
    return merged


# --- agreement -----------------------------------------------------------------------------


def agreement(verdicts: Sequence[Sequence[bool]]) -> tuple[float | None, float | None]:
    """How much the samples of each row agree, over rows with the same number (≥ 2) of
    pass/fail verdicts: (the share of agreeing pairs, Fleiss' kappa). Kappa is None when
    it is not defined (every verdict the same: no variation to agree on)."""
    rows = [list(v) for v in verdicts if len(v) >= 2]
    if not rows:
        return None, None
    n = len(rows[0])
    rows = [r for r in rows if len(r) == n]
    pairs = []
    passes = 0
    for row in rows:
        yes = sum(row)
        no = n - yes
        pairs.append((yes * (yes - 1) + no * (no - 1)) / (n * (n - 1)))
        passes += yes
    observed = sum(pairs) / len(rows)
    p_yes = passes / (len(rows) * n)
    expected = p_yes**2 + (1 - p_yes) ** 2
    if expected >= 1.0:
        return observed, None
    return observed, (observed - expected) / (1 - expected)


# --- the judge scorers (scorers.score calls them) --------------------------------------------


async def judge_score(
    name: str, spec: JudgeSpec, run: FinishedRun, ctx: ScoringContext
) -> ScoreValue:
    from awf_nb.engine.ports import TurnRequest

    data = {**run.data(), "env": dict(ctx.env)}
    prompt = render_case_template(
        spec.question, data, what=f"scorer {name}: judge.prompt", base_dir=ctx.base_dir
    )
    # The format comes last, after whatever the run wrote into the prompt (`.transcript`).
    if spec.criteria is not None:
        prompt += criteria_format(spec.criteria)
    else:
        prompt += JUDGE_JSON_FORMAT if "json_schema" in spec.options else JUDGE_FORMAT
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
    if spec.criteria is not None and "json_schema" not in options:
        from awf_nb.evals.run_setup import canonical_provider

        if canonical_provider(provider_name) in SCHEMA_PROVIDERS:
            options = {**options, "json_schema": criteria_schema(len(spec.criteria))}
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
    from awf_nb.evals.pricing import add, model_of, price_of, tokens_cost

    price = price_of(ctx.pricing, provider_name, model_of(options))
    total = ScoreValue(None)
    samples: list[ScoreValue] = []
    for _ in range(spec.samples):
        asked = turn
        first: tuple[str, str] | None = None  # the first unreadable answer: problem, text
        for attempt in range(spec.retries + 1):
            try:
                answer = await ask(provider, asked, spec)
            except AwfError as exc:
                if first is None:
                    raise  # the judge's provider failed: an error in the cell, as always
                answer = Answer(None, error=f"asking again failed: {exc.message}")
            total.tokens += answer.tokens_in + answer.tokens_out
            total.cost = add(total.cost, tokens_cost(price, answer.tokens_in, answer.tokens_out))
            if answer.text is None and first is None:  # a timeout, an answer too long
                total.error = f"scorer {name}: {answer.error}"
                return total
            if answer.text is not None:
                value, problem = _read_verdict(spec, answer.text)
                if value is not None:
                    samples.append(value)
                    break
                first = first or (problem, answer.text)
            assert first is not None
            if answer.text is None or attempt == spec.retries:
                # what the judge answered first is shown; the retries are counted
                total.error = f"scorer {name}: {first[0]}"
                if answer.text is None:
                    total.error += f" ({answer.error})"
                elif total.retries:
                    total.error += f" (asked {total.retries + 1} times)"
                total.detail = _excerpt(first[1])
                return total
            total.retries += 1
            asked = again(turn, prompt, first[0] if attempt == 0 else problem)
    return _combined(spec, samples, total)


async def panel_score(
    name: str, panel: list[JudgeSpec], run: FinishedRun, ctx: ScoringContext
) -> ScoreValue:
    """Several judges of one question (`judges:`): the majority of their verdicts (a tie
    fails), the mean of their scores; each judge's verdict kept (`samples`) for their
    agreement. A judge that cannot decide makes the cell an error."""
    from awf_nb.evals.pricing import add

    values = [await judge_score(f"{name}.{n}", judge, run, ctx) for n, judge in enumerate(panel, 1)]
    tokens = sum(v.tokens for v in values)
    cost = None
    for v in values:
        cost = add(cost, v.cost)
    retries = sum(v.retries for v in values)
    failed = next((v for v in values if v.passed is None), None)
    if failed is not None:
        return ScoreValue(
            None, error=failed.error, detail=failed.detail, tokens=tokens, cost=cost,
            retries=retries,
        )  # fmt: skip
    votes = [v.passed is True for v in values]
    mean = sum(v.score or 0.0 for v in values) / len(values)
    return ScoreValue(
        sum(votes) * 2 > len(votes),
        mean,
        detail="; ".join(f"judge {n}: {v.outcome} ({v.score:g})" for n, v in
                         enumerate(values, 1) if v.score is not None),
        tokens=tokens,
        cost=cost,
        retries=retries,
        samples=[{"judge": n, "score": v.score, "passed": v.passed}
                 for n, v in enumerate(values, 1)],
    )  # fmt: skip


def _read_verdict(spec: JudgeSpec, answer: str) -> tuple[ScoreValue | None, str]:
    """One judge answer read: its verdict, or None and what is wrong with it."""
    shown = _excerpt(answer)
    if spec.criteria is None:
        number, problem = judge_verdict(answer)
        if number is None:
            return None, problem
        assert spec.pass_ is not None
        return ScoreValue(spec.pass_.passes(number), number, detail=shown), ""
    verdicts, problem = criteria_verdict(answer, spec.criteria)
    if verdicts is None:
        return None, problem
    return _criteria_value(spec, verdicts), ""


def _criteria_value(spec: JudgeSpec, verdicts: list[dict[str, Any]]) -> ScoreValue:
    share = sum(v["passed"] for v in verdicts) / len(verdicts)
    passed = spec.pass_.passes(share) if spec.pass_ is not None else share == 1.0
    return ScoreValue(passed, share, detail=criteria_detail(verdicts), criteria=verdicts)


def _combined(spec: JudgeSpec, samples: list[ScoreValue], total: ScoreValue) -> ScoreValue:
    """The judge's verdict over its samples (one: that one), with the tokens, cost and
    retries of every turn."""
    if len(samples) == 1:
        value = samples[0]
    elif spec.criteria is not None:
        value = _criteria_value(spec, majority([s.criteria for s in samples]))
    else:
        assert spec.pass_ is not None
        mean = sum(s.score or 0.0 for s in samples) / len(samples)
        value = ScoreValue(spec.pass_.passes(mean), mean, detail=samples[0].detail)
    if len(samples) > 1:
        value.samples = [{"score": s.score, "passed": s.passed} for s in samples]
    value.tokens, value.cost, value.retries = total.tokens, total.cost, total.retries
    return value
