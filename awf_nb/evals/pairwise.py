"""The pairwise judge: which of two variants' conversations of the same (case, epoch) is better.

`pairwise:` in an eval with variants (eval-decisions.md §4). For every other variant B
against the first, A, and every (case, epoch) both ran, the judge is shown the two
conversations and asked which is better — **twice, with the positions swapped** (A first,
then B first), because judges favour a position. B *wins* when both answers prefer B,
*loses* when both prefer A, and it is a *tie* otherwise (the judge said so, or the two
orders disagree). The outcomes are compared over cases as any scorer is (compare.py: a
paired bootstrap interval of wins − losses, McNemar's exact test on cases won against
cases lost).

An answer is `WINNER: A`, `WINNER: B` or `WINNER: TIE` on a line of its own (or, for the
`local` model, held to a JSON Schema: `{"winner": "A"}`); one that cannot be read is asked
again, up to `retries` times, then the pair is an error (counted apart, never a tie).

Each judged pair is a line of the eval's `pairwise.jsonl` as soon as it is decided, so an
interrupted eval judges only the pairs left when it is resumed. With cassettes, each pair's
two judge turns are recorded to (and replayed from) `DIR/pairwise/B/CASE-EPOCH.cassette.jsonl`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import AwfError

if TYPE_CHECKING:
    from awf_nb.evals.datasets import Case
    from awf_nb.evals.driver import EvalRun
    from awf_nb.evals.model import PairwiseSpec
    from awf_nb.evals.results import EvalRow
    from awf_nb.store import Store

PAIRWISE_SPEAKER = "pairwise judge"
PAIRWISE_FORMAT = (
    "\n\nEnd your answer with one line naming the better conversation: `WINNER: A`, "
    "`WINNER: B`, or `WINNER: TIE` when neither is better."
)
PAIRWISE_JSON_FORMAT = (
    '\n\nAnswer with a JSON object naming the better conversation: {"winner": "A"}, '
    '{"winner": "B"}, or {"winner": "TIE"} when neither is better.'
)
PAIRWISE_SCHEMA = {
    "type": "object",
    "properties": {"winner": {"enum": ["A", "B", "TIE"]}},
    "required": ["winner"],
}
_WINNER = re.compile(r"winner\W{0,4}\s*(A|B|TIE)\b", re.IGNORECASE)
OUTCOMES = ("win", "tie", "loss", "error")  # B's, against A


@dataclass(frozen=True)
class PairOutcome:
    """One (case, epoch) of variants A and B judged: B's win, tie or loss (or an error)."""

    case: str
    epoch: int
    a: str  # the variants' names
    b: str
    outcome: str  # one of OUTCOMES
    a_run: str = ""
    b_run: str = ""
    first: str = ""  # the judge's pick with A shown first: "A", "B", "TIE" ("" unread)
    second: str = ""  # with B shown first, named as the variants were: "A", "B", "TIE"
    error: str = ""
    tokens: int = 0
    retries: int = 0

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.case, self.epoch, self.a, self.b)

    @property
    def value(self) -> int:
        """+1 a win of B, -1 a loss, 0 a tie (an error has none: check `outcome`)."""
        return {"win": 1, "loss": -1}.get(self.outcome, 0)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairOutcome:
        """A stored line, checked (a folder changed by hand is an error, not a crash)."""
        texts = ("case", "a", "b", "outcome", "a_run", "b_run", "first", "second", "error")
        for name in texts:
            if name in data and not isinstance(data[name], str):
                raise TypeError(f'"{name}" must be text')
        for name in ("epoch", "tokens", "retries"):
            value = data.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f'"{name}" must be a whole number')
        if data.get("outcome") not in OUTCOMES:
            raise ValueError(f'"outcome" must be one of {", ".join(OUTCOMES)}')
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def read_winner(text: str) -> tuple[str | None, str]:
    """The judge's pick ("A", "B" or "TIE") in its answer, or None and what is wrong."""
    from awf_nb.evals.judges import _json_in

    data = _json_in(text)
    if isinstance(data, dict) and isinstance(data.get("winner"), str):
        pick = data["winner"].strip().upper()
        if pick in ("A", "B", "TIE"):
            return pick, ""
    picks = {match.upper() for match in _WINNER.findall(text)}
    if len(picks) == 1:
        return picks.pop(), ""
    if picks:
        return None, f"the answer names several winners ({', '.join(sorted(picks))})"
    return None, "the answer holds no WINNER: A, WINNER: B or WINNER: TIE line"


def decide(first: str, second: str) -> str:
    """B's outcome from the two orders' picks (both named as the variants were)."""
    if first == second == "B":
        return "win"
    if first == second == "A":
        return "loss"
    return "tie"


@dataclass
class PairJob:
    """What one pair needs: the two rows, their case, the cassette of its judge turns."""

    case: Case
    epoch: int
    a_row: EvalRow
    b_row: EvalRow
    cassette: tuple[str, Path] | None = None  # ("record" | "replay", path)


async def judge_pair(
    job: PairJob,
    spec: PairwiseSpec,
    *,
    store: Store,
    env: Mapping[str, str],
    base_dir: Path,
    seed: int | None,
    transcript: Callable[[Case, EvalRow], str],
) -> PairOutcome:
    """Judge one pair in both orders (see the module docstring)."""
    a, b = job.a_row, job.b_row
    outcome = PairOutcome(job.case.id, job.epoch, a.variant, b.variant, "error",
                          a_run=a.run_id, b_run=b.run_id)  # fmt: skip
    picks: list[str] = []
    tokens = retries = 0
    try:
        texts = {"A": transcript(job.case, a), "B": transcript(job.case, b)}
        providers = _providers(job, seed, env)
    except AwfError as exc:  # a run that cannot be read, a cassette that cannot be used
        return _replace(outcome, error=f"pairwise judge: {exc.message}")
    try:
        for order in (("A", "B"), ("B", "A")):
            shown = {"a": texts[order[0]], "b": texts[order[1]]}
            pick, used, asked, error = await _ask(job, spec, shown, providers, env, base_dir)
            tokens += used
            retries += asked
            if pick is None:
                return _replace(outcome, error=error, tokens=tokens, retries=retries,
                                first=picks[0] if picks else "")  # fmt: skip
            # the second order showed B as "A": name the pick as the variants were
            picks.append(pick if order == ("A", "B") else {"A": "B", "B": "A"}.get(pick, pick))
    except AwfError as exc:
        return _replace(outcome, error=f"pairwise judge: {exc.message}", tokens=tokens)
    finally:
        await providers.aclose()
    return _replace(outcome, outcome=decide(picks[0], picks[1]), first=picks[0],
                    second=picks[1], tokens=tokens, retries=retries)  # fmt: skip


def _replace(pair: PairOutcome, **changes: Any) -> PairOutcome:
    import dataclasses

    return dataclasses.replace(pair, **changes)


def _providers(job: PairJob, seed: int | None, env: Mapping[str, str]) -> Any:
    from awf_nb.evals import run_setup

    if job.cassette is None:
        return run_setup.ScoringProviders(run_setup._SeededFactory(seed))
    mode, path = job.cassette
    return run_setup.cassette_providers(mode, path, seed, env=env, workflow="pairwise")


async def _ask(
    job: PairJob,
    spec: PairwiseSpec,
    shown: dict[str, str],
    providers: Any,
    env: Mapping[str, str],
    base_dir: Path,
) -> tuple[str | None, int, int, str]:
    """One order asked (again while unreadable): (pick, tokens, retries, error)."""
    from awf_nb.engine.ports import TurnRequest
    from awf_nb.evals.judges import again, ask
    from awf_nb.evals.run_setup import canonical_provider
    from awf_nb.evals.scorers import render_case_template, render_case_value

    data = {"case": dict(job.case.row), "epoch": job.epoch, "env": dict(env), **shown}
    where = "pairwise"
    prompt = render_case_template(spec.prompt, data, what=f"{where}.prompt", base_dir=base_dir)
    name = render_case_template(spec.provider, data, what=f"{where}.provider",
                                base_dir=base_dir).strip()  # fmt: skip
    options = render_case_value(spec.options, data, what=f"{where}.options", base_dir=base_dir)
    schema = "json_schema" in options or canonical_provider(name) == "local"
    if canonical_provider(name) == "local" and "json_schema" not in options:
        options = {**options, "json_schema": PAIRWISE_SCHEMA}
    prompt += PAIRWISE_JSON_FORMAT if schema else PAIRWISE_FORMAT
    system = None
    if spec.system_prompt is not None:
        system = render_case_template(spec.system_prompt, data, what=f"{where}.system_prompt",
                                      base_dir=base_dir)  # fmt: skip
    turn = TurnRequest(prompt=prompt, system_prompt=system, options=options,
                       timeout=spec.timeout, step="pairwise", speaker=PAIRWISE_SPEAKER)  # fmt: skip
    provider = providers(name)
    tokens = 0
    asked = turn
    problem = ""
    for attempt in range(spec.retries + 1):
        answer = await ask(provider, asked, spec)  # type: ignore[arg-type]
        tokens += answer.tokens_in + answer.tokens_out
        if answer.text is None:
            return None, tokens, attempt, f"pairwise judge: {answer.error}"
        pick, problem = read_winner(answer.text)
        if pick is not None:
            return pick, tokens, attempt, ""
        asked = again(turn, prompt, problem)
    tries = spec.retries + 1
    return None, tokens, spec.retries, f"pairwise judge: {problem} (asked {tries} times)"


def pending_pairs(
    rows: Iterable[EvalRow], variants: list[str], done: Iterable[tuple[str, int, str, str]]
) -> list[tuple[EvalRow, EvalRow]]:
    """The (A row, B row) pairs to judge: every other variant against the first, each
    (case, epoch) both ran, not judged yet."""
    if len(variants) < 2:
        return []
    judged = set(done)
    by_key = {row.run_key: row for row in rows if row.run_id and row.status == "completed"}
    base = variants[0]
    found = []
    for (case, epoch, variant), a_row in sorted(by_key.items()):
        if variant != base:
            continue
        for other in variants[1:]:
            b_row = by_key.get((case, epoch, other))
            if b_row is not None and (case, epoch, base, other) not in judged:
                found.append((a_row, b_row))
    return found


async def judge_pairs(run: EvalRun) -> None:
    """The pairwise judge over every pair of `run` not judged yet, as many at once as the
    eval runs runs; each pair's line written as soon as it is decided."""
    import asyncio

    from awf_nb.evals.run_setup import environment

    spec = run.spec.file.pairwise
    assert spec is not None
    cases = {case.id: case for case in run.cases}
    pending = iter(pending_pairs(run.rows, run.manifest.variants, (p.key for p in run.pairs)))
    env = environment(run.env)

    async def worker() -> None:
        for a_row, b_row in pending:  # shared: each worker takes the next pair left
            case = cases.get(a_row.case)
            if case is None:
                continue
            job = PairJob(case, a_row.epoch, a_row, b_row, _pair_cassette(run, case, b_row))
            outcome = await judge_pair(
                job, spec, store=run.folder.store, env=env, base_dir=run.spec.base_dir,
                seed=a_row.seed, transcript=lambda c, r: _transcript(run, c, r),
            )  # fmt: skip
            await asyncio.to_thread(run.folder.append_pairwise, outcome)
            run.pairs.append(outcome)

    await asyncio.gather(*(worker() for _ in range(run.manifest.concurrency)))


def _pair_cassette(run: EvalRun, case: Case, row: EvalRow) -> tuple[str, Path] | None:
    """Where the judge turns of a pair are recorded or replayed from, with cassettes."""
    from awf_nb.evals.cassettes import cassette_path

    mode, folder = run.manifest.cassette_mode, run.manifest.cassette_dir
    if not mode:
        return None
    path = cassette_path(Path(folder) / "pairwise", case, row.epoch, row.variant)
    if mode == "record":
        return ("record", path)
    return ("replay", path) if mode == "replay" or path.is_file() else ("record", path)


def _transcript(run: EvalRun, case: Case, row: EvalRow) -> str:
    """A finished run's conversation as judges read it (`{{.transcript}}`)."""
    from awf_nb.evals.scorers import FinishedRun
    from awf_nb.secrets import Masker

    state = run.folder.store.load_state(row.run_id)
    finished = FinishedRun.of(case, row.epoch, state, Masker(), seconds=row.seconds)
    return str(finished.data()["transcript"])
