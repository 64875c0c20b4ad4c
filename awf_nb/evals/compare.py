"""Two evals side by side (`awf eval-show A --vs B`): which cases flipped.

Per case, an eval's verdict is `pass` (every epoch passed), `fail` (none did) or `mixed`;
a case flipped when its verdict differs between the two evals. Cases only one eval ran
are listed apart, so a comparison of different datasets says so instead of guessing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from awf_nb.evals import stats
from awf_nb.evals.results import EvalResult, EvalRow


@dataclass(frozen=True)
class CaseComparison:
    case: str
    before: str  # pass | fail | mixed | "" (not in that eval)
    after: str
    before_passed: str  # "2/3"
    after_passed: str

    @property
    def flipped(self) -> bool:
        return bool(self.before and self.after) and self.before != self.after

    @property
    def direction(self) -> str:
        """ "better", "worse" or "changed" (mixed on one side)."""
        rank = {"fail": 0, "mixed": 1, "pass": 2}
        if not self.flipped:
            return ""
        return "better" if rank[self.after] > rank[self.before] else "worse"


def verdicts(result: EvalResult) -> dict[str, tuple[str, str]]:
    """case -> (verdict, "passed/runs")."""
    runs: dict[str, list[bool]] = {}
    for row in result.rows:
        runs.setdefault(row.case, []).append(row.passed is True)
    found = {}
    for case, passed in runs.items():
        count = sum(passed)
        verdict = "pass" if count == len(passed) else "fail" if count == 0 else "mixed"
        found[case] = (verdict, f"{count}/{len(passed)}")
    return found


def compare(before: EvalResult, after: EvalResult) -> list[CaseComparison]:
    """Every case of either eval, flipped ones first."""
    a, b = verdicts(before), verdicts(after)
    cases = sorted(set(a) | set(b))
    found = [
        CaseComparison(
            case,
            a.get(case, ("", ""))[0],
            b.get(case, ("", ""))[0],
            a.get(case, ("", "-"))[1],
            b.get(case, ("", "-"))[1],
        )
        for case in cases
    ]
    return sorted(found, key=lambda c: (not c.flipped, c.case))


# --- The paired comparison with confidence (eval-decisions §2) -------------------------

ALPHA = 0.05


@dataclass(frozen=True)
class Flip:
    """A case whose verdict differs between A and B, with both sides' runs."""

    case: str
    direction: str  # "better" | "worse"
    a_runs: tuple[str, ...]
    b_runs: tuple[str, ...]


@dataclass(frozen=True)
class ScorerComparison:
    """One scorer (or `passed`, every scorer at once) compared between A and B."""

    scorer: str
    metric: str  # "pass rate" | "mean score"
    cases: int  # cases decided in both
    a_mean: float | None
    b_mean: float | None
    difference: float | None  # B - A, mean over cases
    low: float | None
    high: float | None
    better: int  # cases B passes and A does not (pass/fail only)
    worse: int
    p_value: float | None  # McNemar's exact for pass/fail, else the bootstrap's
    p_adjusted: float | None  # Holm-adjusted over every comparison made
    verdict: str  # "better" | "worse" | "no clear difference"
    note: str = ""  # small samples, said plainly
    flips: tuple[Flip, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "scorer": self.scorer, "metric": self.metric, "cases": self.cases,
            "a_mean": self.a_mean, "b_mean": self.b_mean, "difference": self.difference,
            "ci_low": self.low, "ci_high": self.high, "better": self.better,
            "worse": self.worse, "p_value": self.p_value, "p_adjusted": self.p_adjusted,
            "verdict": self.verdict, "note": self.note,
            "flips": [{"case": f.case, "direction": f.direction, "a_runs": list(f.a_runs),
                       "b_runs": list(f.b_runs)} for f in self.flips],
        }  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """A (baseline) against B: one `ScorerComparison` per scorer and one for `passed`."""

    a: str
    b: str
    scorers: tuple[ScorerComparison, ...]
    comparisons: int  # how many were made (what Holm adjusted for)
    only_a: tuple[str, ...] = ()  # cases one side lacks: not compared
    only_b: tuple[str, ...] = ()

    def __getitem__(self, scorer: str) -> ScorerComparison:
        for one in self.scorers:
            if one.scorer == scorer:
                return one
        raise KeyError(scorer)

    @property
    def verdict(self) -> str:
        """The verdict on `passed` (every scorer at once)."""
        return self["passed"].verdict

    @property
    def flips(self) -> tuple[Flip, ...]:
        return self["passed"].flips

    def regressions(self) -> list[str]:
        """The scorers significantly worse in B."""
        return [s.scorer for s in self.scorers if s.verdict == "worse"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "comparisons": self.comparisons,
            "scorers": [s.as_dict() for s in self.scorers],
            "only_a": list(self.only_a), "only_b": list(self.only_b),
        }  # fmt: skip

    def lines(self) -> list[str]:
        """The comparison in words, one line per scorer, then the flipped cases."""
        out = [f"{self.a} → {self.b}: {self.comparisons} comparisons (Holm-adjusted p)"]
        for s in self.scorers:
            out.append(describe(s))
        if self.only_a or self.only_b:
            out.append(f"  not compared: {len(self.only_a)} cases only in {self.a}, "
                       f"{len(self.only_b)} only in {self.b}")  # fmt: skip
        for flip in self.flips:
            mark = "+" if flip.direction == "better" else "-"
            out.append(f"{mark} {flip.case}: {self.a} runs {', '.join(flip.a_runs) or '-'}"
                       f" | {self.b} runs {', '.join(flip.b_runs) or '-'}")  # fmt: skip
        return out

    def to_text(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        import html as _html

        return "<pre>" + _html.escape(self.to_text()) + "</pre>"


def describe(s: ScorerComparison) -> str:
    if s.difference is None or s.low is None or s.high is None:  # set together, or none
        return f"  {s.scorer}: nothing to compare ({s.note or 'no case decided in both'})"
    unit = 100.0 if s.metric == "pass rate" else 1.0
    fmt = "{:+.0f} pts" if unit == 100.0 else "{:+.2f}"
    text = (f"  {s.scorer} ({s.metric}): {fmt.format(s.difference * unit)} "
            f"[95% CI {fmt.format(s.low * unit)}, {fmt.format(s.high * unit)}] over "
            f"{s.cases} cases")  # fmt: skip
    if s.metric == "pass rate":
        text += f"; {s.better} better, {s.worse} worse"
    elif s.metric == "wins - losses":
        ties = s.cases - s.better - s.worse
        text += f"; cases won {s.better}, lost {s.worse}, tied {ties}"
    if s.p_value is not None:
        text += f"; p={s.p_value:.4g} (adjusted {s.p_adjusted:.4g})"
    text += f": {s.verdict}"
    if s.note:
        text += f" — {s.note}"
    return text


def _per_case(
    rows: Iterable[EvalRow], scorer: str | None, numeric: bool
) -> dict[str, tuple[float, bool, list[str]]]:
    """case -> (its value: pass rate or mean score; passed every epoch; run ids).

    `scorer` None is the row's `passed`. A case with an undecided epoch (an error) is left
    out: it is not known whether it passed."""
    found: dict[str, list[tuple[bool | None, float | None, str]]] = {}
    for row in rows:
        if scorer is None:
            found.setdefault(row.case, []).append((row.passed, None, row.run_id))
            continue
        value = row.scores.get(scorer)
        passed = None if value is None else value.passed
        score = None if value is None else value.score
        found.setdefault(row.case, []).append((passed, score, row.run_id))
    out: dict[str, tuple[float, bool, list[str]]] = {}
    for case, trials in found.items():
        if any(passed is None for passed, _, _ in trials):
            continue
        runs = [run for _, _, run in trials if run]
        all_passed = all(passed for passed, _, _ in trials)
        if numeric:
            mean = math.fsum(score for _, score, _ in trials if score is not None) / len(trials)
        else:
            mean = sum(1 for passed, _, _ in trials if passed) / len(trials)
        out[case] = (mean, all_passed, runs)
    return out


def _numeric(rows: Sequence[EvalRow], scorer: str | None) -> bool:
    if scorer is None:
        return False
    values = [row.scores[scorer] for row in rows if scorer in row.scores]
    decided = [v for v in values if v.passed is not None]
    return bool(decided) and all(v.score is not None for v in decided)


def compare_rows(
    a_rows: Sequence[EvalRow],
    b_rows: Sequence[EvalRow],
    scorers: Sequence[str],
    *,
    a: str = "A",
    b: str = "B",
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    extra_p_values: Sequence[float] = (),
    kinds: dict[str, str] | None = None,
    pairs: Sequence[Any] = (),
) -> Comparison:
    """B against A (the baseline), paired by case, for every scorer and `passed`.

    `extra_p_values`: the p-values of other comparisons made at the same time (more
    variants), counted in the Holm adjustment. `kinds`: each scorer's kind; a condition
    is pass/fail, a judge or command with a score on every decided run is compared by its
    mean score."""
    names: list[str | None] = [*scorers, None]
    raw: list[dict[str, Any]] = []
    a_cases = {row.case for row in a_rows}
    b_cases = {row.case for row in b_rows}
    for name in names:
        numeric = (
            (kinds or {}).get(name or "", "") != "condition"
            and _numeric(a_rows, name)
            and _numeric(b_rows, name)
        )
        pa = _per_case(a_rows, name, numeric)
        pb = _per_case(b_rows, name, numeric)
        cases = sorted(set(pa) & set(pb))
        diffs = [pb[c][0] - pa[c][0] for c in cases]
        flips = tuple(
            Flip(c, "better" if pb[c][1] else "worse", tuple(pa[c][2]), tuple(pb[c][2]))
            for c in cases if pa[c][1] != pb[c][1]
        )  # fmt: skip
        better = sum(1 for f in flips if f.direction == "better")
        worse = len(flips) - better
        entry: dict[str, Any] = {
            "scorer": name or "passed", "metric": "mean score" if numeric else "pass rate",
            "cases": len(cases), "better": better, "worse": worse, "flips": flips,
            "a_mean": None, "b_mean": None, "difference": None, "low": None, "high": None,
            "p_value": None,
        }  # fmt: skip
        if cases:
            boot = stats.paired_bootstrap(diffs, resamples=resamples, seed=seed)
            entry.update(
                a_mean=math.fsum(pa[c][0] for c in cases) / len(cases),
                b_mean=math.fsum(pb[c][0] for c in cases) / len(cases),
                difference=boot.mean, low=boot.low, high=boot.high,
                p_value=stats.mcnemar_exact(worse, better) if not numeric else boot.p_value,
            )  # fmt: skip
        raw.append(entry)
    if pairs:
        raw.append(_pairwise_entry(pairs, resamples=resamples, seed=seed))
    own = [e["p_value"] for e in raw]
    adjusted = stats.holm([*own, *extra_p_values])[: len(own)]
    total = sum(1 for p in own if p is not None) + len(extra_p_values)
    out = []
    for entry, p_adj in zip(raw, adjusted, strict=True):
        entry["p_adjusted"] = p_adj
        entry["verdict"], entry["note"] = _verdict(entry, p_adj)
        out.append(ScorerComparison(**entry))
    return Comparison(a, b, tuple(out), total, tuple(sorted(a_cases - b_cases)),
                      tuple(sorted(b_cases - a_cases)))  # fmt: skip


def _pairwise_entry(pairs: Sequence[Any], *, resamples: int, seed: int) -> dict[str, Any]:
    """The pairwise judge's outcomes (`pairwise.PairOutcome`, B against A) as one more
    line of the comparison: per case the mean of its epochs' +1 (B won), 0 (tie), -1 (A
    won); over cases the bootstrap interval of that mean and McNemar's exact test on the
    cases B won against those it lost. Pairs the judge could not decide are left out."""
    per_case: dict[str, list[Any]] = {}
    for pair in pairs:
        if pair.outcome != "error":
            per_case.setdefault(pair.case, []).append(pair)
    cases = sorted(per_case)
    means = {c: math.fsum(p.value for p in per_case[c]) / len(per_case[c]) for c in cases}
    flips = tuple(
        Flip(c, "better" if means[c] > 0 else "worse",
             tuple(p.a_run for p in per_case[c]), tuple(p.b_run for p in per_case[c]))
        for c in cases if means[c] != 0
    )  # fmt: skip
    better = sum(1 for f in flips if f.direction == "better")
    worse = len(flips) - better
    decided = [p for c in cases for p in per_case[c]]
    entry: dict[str, Any] = {
        "scorer": "pairwise", "metric": "wins - losses", "cases": len(cases),
        "better": better, "worse": worse, "flips": flips,
        "a_mean": None, "b_mean": None, "difference": None, "low": None, "high": None,
        "p_value": None,
    }  # fmt: skip
    if cases:
        boot = stats.paired_bootstrap([means[c] for c in cases], resamples=resamples, seed=seed)
        entry.update(
            # the share of judged pairs each side won (ties make up the rest)
            a_mean=sum(1 for p in decided if p.outcome == "loss") / len(decided),
            b_mean=sum(1 for p in decided if p.outcome == "win") / len(decided),
            difference=boot.mean, low=boot.low, high=boot.high,
            p_value=stats.mcnemar_exact(worse, better),
        )  # fmt: skip
    return entry


def _verdict(entry: dict[str, Any], p_adjusted: float | None) -> tuple[str, str]:
    cases = entry["cases"]
    if entry["difference"] is None:
        return "no clear difference", "no case decided in both"
    if cases < stats.MIN_CASES:
        return ("no clear difference",
                f"{cases} case{'s' if cases != 1 else ''}: too few to tell; an interval this "
                "wide means nothing yet")  # fmt: skip
    if entry["low"] <= 0.0 <= entry["high"] or p_adjusted is None or p_adjusted >= ALPHA:
        return "no clear difference", ""
    return ("better" if entry["difference"] > 0 else "worse"), ""


def compare_results(
    before: EvalResult, after: EvalResult, *, seed: int = stats.DEFAULT_SEED
) -> Comparison:
    """`awf eval-show A --vs B`: the statistics over the scorers both evals have."""
    names_a = [name for name, _ in before.scorers]
    names_b = {name for name, _ in after.scorers}
    pairs = []
    if before.of_variant and after.of_variant:  # two variants of one eval
        pairs = [p for p in after.pairs if (p.a, p.b) == (before.of_variant, after.of_variant)]
    return compare_rows(
        before.rows, after.rows, [n for n in names_a if n in names_b],
        a=before.of_variant or before.eval_id, b=after.of_variant or after.eval_id,
        seed=seed, kinds=dict(before.scorers), pairs=pairs,
    )  # fmt: skip


def compare_variants(
    result: EvalResult,
    baseline: str = "",
    *,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
) -> list[Comparison]:
    """Every other variant of `result` against `baseline` (default: the first variant),
    paired by case; the p-values of all of them Holm-adjusted together (more variants,
    more chances of a difference by chance)."""
    if len(result.variants) < 2:
        return []
    base = baseline or result.variants[0]
    result.variant(base)  # an unknown name is an error naming the variants
    names = [name for name, _ in result.scorers]
    kinds = dict(result.scorers)
    rows = {name: [row for row in result.rows if row.variant == name] for name in result.variants}
    others = [name for name in result.variants if name != base]

    def one(other: str, extra: Sequence[float]) -> Comparison:
        # the pairwise judge compares every variant with the first only
        pairs = [p for p in result.pairs if p.a == base and p.b == other]
        return compare_rows(rows[base], rows[other], names, a=base, b=other, seed=seed,
                            extra_p_values=extra, kinds=kinds, resamples=resamples,
                            pairs=pairs)  # fmt: skip

    first = {other: one(other, ()) for other in others}
    if len(others) == 1:
        return list(first.values())
    found = []
    for other in others:
        extra = [
            s.p_value
            for name, comparison in first.items() if name != other
            for s in comparison.scorers if s.p_value is not None
        ]  # fmt: skip
        found.append(one(other, extra))
    return found


def check_pairing(baseline: EvalResult, run: Any) -> None:
    """`awf eval FILE --vs-eval EVAL_ID`: refuse a baseline whose runs do not pair with
    this eval's — other case ids, another number of epochs, other sampling seeds."""
    from awf_nb.errors import UserError
    from awf_nb.evals.driver import run_seed

    name = baseline.eval_id
    theirs = {row.case for row in baseline.rows}
    ours = {case.id for case in run.cases}
    if theirs != ours:
        only_theirs, only_ours = sorted(theirs - ours), sorted(ours - theirs)
        raise UserError(
            f"--vs-eval {name}: its cases do not match this eval's by id "
            f"({len(only_theirs)} only in {name}: {', '.join(only_theirs[:5]) or '-'}; "
            f"{len(only_ours)} only here: {', '.join(only_ours[:5]) or '-'})",
            hint="compare evals of the same dataset (and the same --limit)",
        )
    if baseline.epochs != run.manifest.epochs:
        raise UserError(
            f"--vs-eval {name}: it ran {baseline.epochs} epochs, this eval runs "
            f"{run.manifest.epochs}",
            hint=f"give --epochs {baseline.epochs} so every run has its pair",
        )
    for row in baseline.rows:
        if row.seed is not None and row.seed != run_seed(run.manifest.seed, row.case, row.epoch):
            raise UserError(
                f"--vs-eval {name}: its runs were sampled with another seed than this "
                f"eval's ({run.manifest.seed}), so they do not pair",
                hint=f"give --seed with the seed {name} was run with",
            )
