"""The results of an eval: one row per (case, epoch), the summary, and pass^k.

`EvalRow` is what the eval's results JSONL holds, one line per finished run. `EvalSummary`
is computed from rows: per scorer the pass rate, pass^k and mean score; overall the same
over each row's `passed`, tokens, time and errors by kind. `EvalResult` bundles them for
Python (`.rows`, `.summary`, `.to_pandas()`, `_repr_html_`) and `--json`.

pass^k is τ-bench's: for a case with n trials of which c passed, C(c, k) / C(n, k) — the
chance that k trials drawn from its n all pass — averaged over the cases that have at least
k trials, for k = 1 … epochs. A row whose scorer could not decide (an error) counts as a
trial that did not pass, so pass^1, the share of runs that passed, is below the pass rate
(which leaves errors out) whenever a row errored. A workflow that passes each case only
sometimes drops fast as k grows.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from awf_nb.engine.summary import format_duration
from awf_nb.evals.scorers import ScoreValue

Outcome = str  # "pass" | "fail" | "error"
ERROR_KINDS = ("setup", "cassette", "run", "limit", "scorer", "simulator", "worker")


@dataclass
class EvalRow:
    """One finished (case, epoch): its run, its scores, and whether it passed."""

    case: str
    epoch: int
    run_id: str = ""
    status: str = ""  # the run's: completed, failed, cancelled ("" when it never started)
    stopped_by: str = ""
    turns: int = 0
    tokens: int = 0
    judge_tokens: int = 0
    seconds: float = 0.0
    seed: int | None = None
    cost: float | None = None  # USD of the run's turns, with `pricing:` (None: unknown)
    judge_cost: float | None = None  # USD of its judges
    scores: dict[str, ScoreValue] = field(default_factory=dict)
    passed: bool | None = None  # None: an error kept it from being decided
    error: str = ""  # masked
    error_kind: str = ""  # one of ERROR_KINDS, or ""
    variant: str = ""  # the eval's variant this run is of ("" when it has none)

    @property
    def outcome(self) -> Outcome:
        return "error" if self.passed is None else "pass" if self.passed else "fail"

    @property
    def key(self) -> tuple[str, int]:
        """(case, epoch); see `run_key` in an eval with variants."""
        return (self.case, self.epoch)

    @property
    def run_key(self) -> tuple[str, int, str]:
        """What the row is the run of: (case, epoch, variant), unique in an eval."""
        return (self.case, self.epoch, self.variant)

    @property
    def total_cost(self) -> float | None:
        """The run's cost and its judges' (None when neither has a price)."""
        from awf_nb.evals.pricing import add

        return add(self.cost, self.judge_cost)

    def as_dict(self) -> dict[str, Any]:
        variant = {"variant": self.variant} if self.variant else {}
        return {
            "case": self.case,
            "epoch": self.epoch,
            **variant,
            "run_id": self.run_id,
            "status": self.status,
            "stopped_by": self.stopped_by,
            "turns": self.turns,
            "tokens": self.tokens,
            "judge_tokens": self.judge_tokens,
            "seconds": round(self.seconds, 3),
            "seed": self.seed,
            "cost": self.cost,
            "judge_cost": self.judge_cost,
            "scores": {name: value.as_dict() for name, value in self.scores.items()},
            "passed": self.passed,
            "outcome": self.outcome,
            "error": self.error,
            "error_kind": self.error_kind,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalRow:
        scores = data.get("scores") or {}
        return cls(
            case=str(data["case"]),
            epoch=int(data["epoch"]),
            run_id=str(data.get("run_id", "")),
            status=str(data.get("status", "")),
            stopped_by=str(data.get("stopped_by", "")),
            turns=int(data.get("turns", 0) or 0),
            tokens=int(data.get("tokens", 0) or 0),
            judge_tokens=int(data.get("judge_tokens", 0) or 0),
            seconds=float(data.get("seconds", 0.0) or 0.0),
            seed=data.get("seed"),
            cost=data.get("cost"),
            judge_cost=data.get("judge_cost"),
            scores={str(k): ScoreValue.from_dict(v) for k, v in scores.items()},
            passed=data.get("passed"),
            error=str(data.get("error", "")),
            error_kind=str(data.get("error_kind", "")),
            variant=_text(data.get("variant", ""), "variant"),
        )

    def flat(self) -> dict[str, Any]:
        """One flat record (a data frame row): each scorer's value as its own column."""
        record = {k: v for k, v in self.as_dict().items() if k != "scores"}
        for name, value in self.scores.items():
            record[name] = value.passed
            record[f"{name}_score"] = value.score
            if value.error:
                record[f"{name}_error"] = value.error
        return record


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f'"{name}" must be text')
    return value


def pass_hat_k(trials: Mapping[str, Sequence[bool]], k: int) -> float | None:
    """τ-bench's pass^k over cases: mean of C(c, k) / C(n, k) over cases with n >= k."""
    values = [
        math.comb(sum(results), k) / math.comb(len(results), k)
        for results in trials.values()
        if len(results) >= k
    ]
    return sum(values) / len(values) if values else None


def _pass_hat(trials: Mapping[str, Sequence[bool]], epochs: int) -> dict[int, float | None]:
    return {k: pass_hat_k(trials, k) for k in range(1, max(epochs, 1) + 1)}


@dataclass
class ScorerSummary:
    """One scorer over all rows."""

    name: str
    kind: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    mean_score: float | None = None
    pass_hat: dict[int, float | None] = field(default_factory=dict)
    retries: int = 0  # a judge's unreadable answers, asked again (not errors)
    # A judge with `samples:`: the share of its samples' agreeing pairs, Fleiss' kappa.
    agreement: float | None = None
    kappa: float | None = None

    @property
    def pass_rate(self) -> float | None:
        decided = self.passed + self.failed
        return self.passed / decided if decided else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "retries": self.retries,
            "agreement": self.agreement,
            "kappa": self.kappa,
            "kind": self.kind,
            "pass_rate": self.pass_rate,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "mean_score": self.mean_score,
            "pass_hat_k": {str(k): v for k, v in self.pass_hat.items()},
        }


@dataclass
class EvalSummary:
    """The eval at a glance: see the module docstring."""

    rows: int = 0
    cases: int = 0
    epochs: int = 1
    passed: int = 0
    failed: int = 0
    errors: int = 0
    pass_hat: dict[int, float | None] = field(default_factory=dict)
    scorers: dict[str, ScorerSummary] = field(default_factory=dict)
    tokens: int = 0
    judge_tokens: int = 0
    seconds: float = 0.0  # summed over runs
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    cost: float | None = None  # USD of the runs' turns (None: no price known)
    judge_cost: float | None = None  # USD of the judges

    @property
    def total_cost(self) -> float | None:
        from awf_nb.evals.pricing import add

        return add(self.cost, self.judge_cost)

    @property
    def pass_rate(self) -> float | None:
        decided = self.passed + self.failed
        return self.passed / decided if decided else None

    @property
    def mean_tokens(self) -> float | None:
        return self.tokens / self.rows if self.rows else None

    @property
    def mean_seconds(self) -> float | None:
        return self.seconds / self.rows if self.rows else None

    @classmethod
    def of(
        cls, rows: Sequence[EvalRow], scorers: Sequence[tuple[str, str]], epochs: int
    ) -> EvalSummary:
        """The summary of `rows`; `scorers` are (name, kind) in the eval file's order."""
        from awf_nb.evals.pricing import add

        summary = cls(rows=len(rows), cases=len({r.case for r in rows}), epochs=epochs)
        overall: dict[str, list[bool]] = {}
        for row in rows:
            overall.setdefault(row.case, []).append(row.passed is True)
            summary.passed += row.passed is True
            summary.failed += row.passed is False
            summary.errors += row.passed is None
            summary.tokens += row.tokens
            summary.judge_tokens += row.judge_tokens
            summary.seconds += row.seconds
            summary.cost = add(summary.cost, row.cost)
            summary.judge_cost = add(summary.judge_cost, row.judge_cost)
        summary.pass_hat = _pass_hat(overall, epochs)
        # Only the error rows, by kind: a run stopped by a limit that its scorers still
        # judged (failed) keeps its kind on its row, but it is a failure, not an error.
        kinds = Counter(row.error_kind for row in rows if row.error_kind and row.passed is None)
        summary.errors_by_kind = {kind: kinds[kind] for kind in ERROR_KINDS if kinds[kind]}
        for name, kind in scorers:
            one = ScorerSummary(name, kind)
            trials: dict[str, list[bool]] = {}
            numbers: list[float] = []
            sampled: list[list[bool]] = []
            for row in rows:
                value = row.scores.get(name)
                if value is None:
                    continue  # the run never got scored (it could not start)
                one.retries += value.retries
                if value.samples:
                    sampled.append([s.get("passed") is True for s in value.samples])
                trials.setdefault(row.case, []).append(value.passed is True)
                one.passed += value.passed is True
                one.failed += value.passed is False
                one.errors += value.passed is None
                if value.score is not None:
                    numbers.append(value.score)
            one.mean_score = sum(numbers) / len(numbers) if numbers else None
            if sampled:
                from awf_nb.evals.judges import agreement

                one.agreement, one.kappa = agreement(sampled)
            one.pass_hat = _pass_hat(trials, epochs)
            summary.scorers[name] = one
        return summary

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "cases": self.cases,
            "epochs": self.epochs,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "pass_rate": self.pass_rate,
            "pass_hat_k": {str(k): v for k, v in self.pass_hat.items()},
            "scorers": {name: s.as_dict() for name, s in self.scorers.items()},
            "tokens": self.tokens,
            "judge_tokens": self.judge_tokens,
            "mean_tokens": self.mean_tokens,
            "seconds": round(self.seconds, 3),
            "mean_seconds": self.mean_seconds,
            "errors_by_kind": dict(self.errors_by_kind),
            "cost": self.cost,
            "judge_cost": self.judge_cost,
            "total_cost": self.total_cost,
        }

    def table(self) -> list[list[str]]:
        """The summary as rows of text cells (header first): one line per scorer and one
        for the whole (`passed`)."""
        ks = list(range(1, self.epochs + 1))
        header = ["scorer", "kind", "pass rate", *[f"pass^{k}" for k in ks], "mean score",
                  "errors"]  # fmt: skip
        lines = [header]
        for s in self.scorers.values():
            lines.append(
                [
                    s.name,
                    s.kind,
                    percent(s.pass_rate),
                    *[percent(s.pass_hat.get(k)) for k in ks],
                    number(s.mean_score),
                    str(s.errors),
                ]
            )
        lines.append(
            [
                "passed",
                "all",
                percent(self.pass_rate),
                *[percent(self.pass_hat.get(k)) for k in ks],
                "",
                str(self.errors),
            ]
        )
        return lines

    def totals_line(self) -> str:
        parts = [
            f"{self.rows} runs of {self.cases} cases",
            f"{self.passed} passed, {self.failed} failed, {self.errors} errors",
            f"{self.tokens} tokens"
            + (f" (+{self.judge_tokens} judging)" if self.judge_tokens else ""),
            f"{format_duration(self.seconds)} of runs",
        ]
        if self.total_cost is not None:
            from awf_nb.evals.pricing import usd

            parts.append(
                f"cost {usd(self.total_cost)}"
                + (f" ({usd(self.judge_cost)} judging)" if self.judge_cost else "")
            )
        if self.errors_by_kind:
            parts.append("errors: " + ", ".join(f"{k} {v}" for k, v in self.errors_by_kind.items()))
        retries = sum(s.retries for s in self.scorers.values())
        if retries:
            parts.append(f"{retries} unreadable judge answers asked again")
        for s in self.scorers.values():
            if s.agreement is not None:
                kappa = "-" if s.kappa is None else f"{s.kappa:.2f}"
                parts.append(
                    f"{s.name}: samples agree {percent(s.agreement)} (Fleiss' kappa {kappa})"
                )
        return "; ".join(parts)

    def to_text(self) -> str:
        return format_table(self.table()) + "\n" + self.totals_line()


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(lines: Sequence[Sequence[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines
    )


@dataclass
class EvalResult:
    """A whole eval: its id, its rows and their summary (see the module docstring)."""

    eval_id: str
    workflow: str
    rows: list[EvalRow]
    scorers: list[tuple[str, str]]  # (name, kind)
    epochs: int
    status: str = "completed"  # completed | cancelled | stopped | running | interrupted
    total: int = 0  # (case, epoch) pairs the eval asked for
    storage: str = ""  # the storage root, for links to runs
    created_at: str = ""  # when the eval started (UTC, ISO 8601)
    finished_at: str = ""  # when it last stopped ("" while it runs)
    stopped: str = ""  # status "stopped": why ("budget")
    budget: float | None = None  # USD the eval may spend
    rescored_from: str = ""  # the eval whose runs it scores again (`awf eval-rescore`)
    variants: list[str] = field(default_factory=list)  # the file's order; the first: baseline
    of_variant: str = ""  # this result is one variant's rows (`result.variant(name)`)
    # the pairwise judge's decided pairs (`pairwise.PairOutcome`), every variant vs the first
    pairs: list[Any] = field(default_factory=list)
    # comparisons made, by (baseline, seed): the table, the gates and --json share them
    _compared: dict[tuple[str, int], list[Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def summary(self) -> EvalSummary:
        return EvalSummary.of(self.rows, self.scorers, self.epochs)

    @property
    def failed(self) -> list[EvalRow]:
        """Rows that did not pass (failed or error)."""
        return [row for row in self.rows if row.passed is not True]

    @property
    def complete(self) -> bool:
        return len(self.rows) >= self.total

    def run(self, case: str, epoch: int = 1, variant: str | None = None) -> Any:
        """The stored run (`RunState`) of one (case, epoch) — of `variant` in an eval with
        variants (default: the first): its steps, its conversation."""
        from awf_nb.errors import UserError
        from awf_nb.store import Store

        if variant is None:
            variant = self.variants[0] if self.variants else ""
        elif variant:
            self.variant(variant)  # an unknown name is an error naming the variants
        for row in self.rows:
            if row.run_key == (str(case), epoch, variant) and row.run_id:
                return Store(self.storage or None).load_state(row.run_id)
        of = f" of variant {variant}" if variant else ""
        raise UserError(f'eval {self.eval_id} has no run of case "{case}" epoch {epoch}{of}')

    def variant(self, name: str) -> EvalResult:
        """One variant's rows as a result of their own: its summary, table and runs."""
        from awf_nb.errors import UserError

        if name not in self.variants:
            known = ", ".join(self.variants) if self.variants else "none"
            raise UserError(f'eval {self.eval_id} has no variant "{name}" (its variants: {known})')
        return dataclasses.replace(
            self,
            rows=[row for row in self.rows if row.variant == name],
            total=self.total // len(self.variants),
            variants=[],
            of_variant=name,
        )

    def compare(
        self, baseline: EvalResult | str, other: str | None = None, *, seed: int = 0
    ) -> Any:
        """A paired comparison (evals/compare.py `Comparison`): per scorer the mean
        difference with its 95 % paired bootstrap interval, McNemar's p for pass/fail,
        Holm-adjusted, a verdict, the flipped cases.

        `result.compare("baseline", "bigger-model")`: two variants of this eval;
        `result.compare(earlier)`: this eval against an earlier one of the same cases."""
        from awf_nb.evals.compare import compare_results

        if isinstance(baseline, str):
            if not isinstance(other, str):
                raise TypeError('compare() of two variants takes both names: '
                                'compare("baseline", "other")')  # fmt: skip
            return compare_results(self.variant(baseline), self.variant(other), seed=seed)
        if not isinstance(baseline, EvalResult):
            raise TypeError(f"compare() takes another eval's result, got {type(baseline).__name__}")
        return compare_results(baseline, self, seed=seed)

    def gates(self, extra: Sequence[str] = ()) -> list[Any]:
        """The eval file's `gate:` rules and `extra` ones, checked as `awf eval` checks
        them (`gates.GateResult`s: see `gates.gates_of`)."""
        from awf_nb.evals.gates import gates_of

        return gates_of(self, extra)

    def comparisons(self, baseline: str = "", *, seed: int = 0) -> list[Any]:
        """Every other variant against `baseline` (default: the first variant), Holm-
        adjusted together; none for an eval without variants."""
        from awf_nb.evals.compare import compare_variants

        key = (baseline or (self.variants[0] if self.variants else ""), seed)
        if key not in self._compared:
            self._compared[key] = compare_variants(self, baseline, seed=seed)
        return self._compared[key]

    def as_dict(self) -> dict[str, Any]:
        return {
            "eval_id": self.eval_id,
            "workflow": self.workflow,
            "status": self.status,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "total": self.total,
            "stopped": self.stopped,
            "budget": self.budget,
            "rescored_from": self.rescored_from,
            "summary": self.summary.as_dict(),
            **(
                {"variants": {name: self.variant(name).summary.as_dict() for name in self.variants}}
                if self.variants
                else {}
            ),
            "rows": [row.as_dict() for row in self.rows],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, ensure_ascii=False)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, one column per scorer (pandas is not a
        dependency: install it to use this)."""
        try:
            import pandas as pd
        except ImportError:
            from awf_nb.errors import UserError

            raise UserError(
                "EvalResult.to_pandas() needs pandas, which awf-nb does not install: "
                "pip install pandas"
            ) from None
        return pd.DataFrame([row.flat() for row in self.rows])

    def report(self, format: str = "html", path: str | None = None) -> str:
        """The eval as a report (`format`: html, markdown, junit), read from its folder in
        the store; also written to `path` when given. See `awf eval-report`."""
        from pathlib import Path

        from awf_nb.evals.report import load_report, render

        text = render(load_report(self.eval_id, storage=self.storage or None), format)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def export_inspect(self, path: str) -> Any:
        """Write the eval as an Inspect AI log (`path` ends in .eval or .json); returns the
        path. See `awf eval-export`."""
        from awf_nb.evals.report import load_report
        from awf_nb.evals.report.inspect_log import write_inspect_log

        return write_inspect_log(load_report(self.eval_id, storage=self.storage or None), path)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<EvalResult {self.eval_id} {self.workflow}: {s.passed}/{s.rows} passed, "
            f"{s.errors} errors, {self.status}>"
        )

    def _repr_html_(self) -> str:
        from awf_nb.evals.results_html import results_html

        return results_html(self)


def summary_text(result: EvalResult) -> str:
    """The summary as text: in an eval with variants, one block per variant, each named."""
    if not result.variants:
        return result.summary.to_text()
    return "\n\n".join(
        f"variant {name}\n{result.variant(name).summary.to_text()}" for name in result.variants
    )


def ordered_rows(rows: Iterable[EvalRow]) -> list[EvalRow]:
    """Failed and errored rows first, then by case and epoch (the order tables show)."""
    rank = {"error": 0, "fail": 1, "pass": 2}
    return sorted(rows, key=lambda r: (rank[r.outcome], r.case, r.epoch))


def row_cells(
    row: EvalRow, scorers: Sequence[tuple[str, str]], with_variant: bool = False
) -> list[str]:
    """A row as the tables show it: case, epoch, (variant,) outcome, status, turns,
    tokens, time, each scorer, error."""
    from awf_nb.evals.pricing import usd

    cells = [row.case, str(row.epoch), *([row.variant] if with_variant else []), row.outcome,
             row.status or "-", str(row.turns), str(row.tokens), format_duration(row.seconds),
             usd(row.total_cost)]  # fmt: skip
    for name, _ in scorers:
        cells.append(score_cell(row.scores.get(name)))
    cells.append(row.error)
    return cells


def score_cell(value: ScoreValue | None) -> str:
    if value is None:
        return "-"
    if value.passed is None:
        return "error"
    text = "pass" if value.passed else "fail"
    if value.score is not None and value.score not in (0.0, 1.0):
        text += f" ({value.score:g})"
    return text


def table_header(scorers: Sequence[tuple[str, str]], with_variant: bool = False) -> list[str]:
    return ["case", "epoch", *(["variant"] if with_variant else []), "outcome", "status",
            "turns", "tokens", "time", "cost", *[name for name, _ in scorers],
            "error"]  # fmt: skip
