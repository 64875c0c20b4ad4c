"""Two evals side by side (`awf eval-show A --vs B`): which cases flipped.

Per case, an eval's verdict is `pass` (every epoch passed), `fail` (none did) or `mixed`;
a case flipped when its verdict differs between the two evals. Cases only one eval ran
are listed apart, so a comparison of different datasets says so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

from awf_nb.evals.results import EvalResult


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
