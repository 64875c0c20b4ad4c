"""Gates: the CI answer of an eval (`gate:` in the eval file, `--gate` on the command line).

A gate is one line:

- `passed >= 80%` — the pass rate of the all-scorers verdict;
- `SCORER >= 80%` or `SCORER.pass_rate >= 0.8` — one scorer's pass rate;
- `SCORER.mean >= 3.5` — one scorer's mean score;
- `{no_regression: VARIANT}` (or the text `no_regression: VARIANT`) — no scorer is
  significantly worse than that variant (the paired comparison's verdict, so noise does
  not fail it).

`awf eval` exits 0 when every gate holds, 3 when one fails (it says which), 1 when a gate
cannot be decided (a pass rate over no decided run, a variant that is not there).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from awf_nb.errors import UserError

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
    "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
_THRESHOLD = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.(mean|pass_rate))?\s*(>=|<=|==|!=|>|<)\s*"
    r"(-?\d+(?:\.\d+)?)\s*(%?)\s*$"
)
_NO_REGRESSION = re.compile(r"^\s*no_regression\s*:\s*([A-Za-z0-9_.-]+)\s*$")


@dataclass(frozen=True)
class Gate:
    """One gate, parsed."""

    text: str
    subject: str = ""  # "passed" or a scorer's name
    measure: str = "pass_rate"  # "pass_rate" | "mean"
    op: str = ""
    threshold: float = 0.0
    no_regression: str = ""  # the baseline variant

    @classmethod
    def parse(cls, value: Any) -> Gate:
        if isinstance(value, dict) and list(value) == ["no_regression"]:
            return cls(f"no_regression: {value['no_regression']}",
                       no_regression=str(value["no_regression"]))  # fmt: skip
        if not isinstance(value, str):
            raise ValueError(
                f"a gate is a line such as 'passed >= 80%' or {{no_regression: baseline}}, "
                f"got {value!r}"
            )
        match = _NO_REGRESSION.match(value)
        if match:
            return cls(value.strip(), no_regression=match.group(1))
        match = _THRESHOLD.match(value)
        if match is None:
            raise ValueError(
                f"gate {value!r} is not understood: write 'passed >= 80%', "
                "'SCORER.mean >= 3.5' or 'no_regression: VARIANT'"
            )
        subject, measure, op, number, pct = match.groups()
        measure = measure or "pass_rate"
        threshold = float(number)
        if pct:
            if measure == "mean":
                raise ValueError(f"gate {value!r}: a mean score is not a percentage")
            threshold /= 100.0
        return cls(value.strip(), subject, measure, op, threshold)


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    holds: bool | None  # None: it cannot be decided
    detail: str


def check_gates(
    gates: Sequence[Gate],
    summary: Any,
    *,
    scorers: Sequence[str],
    comparisons: dict[str, Any] | None = None,
) -> list[GateResult]:
    """Each gate against the eval's summary (`EvalSummary`) and, for `no_regression`, the
    comparisons of every variant against a baseline (`{baseline: [Comparison, ...]}`)."""
    out = []
    for gate in gates:
        out.append(_check(gate, summary, scorers, comparisons or {}))
    return out


def check_result_gates(
    gates: Sequence[Gate], result: Any, comparisons: dict[str, Any] | None = None
) -> list[GateResult]:
    """Each gate against an eval's result (`EvalResult`). In an eval with variants a
    threshold gate (`passed >= 80%`) must hold for every variant run, each named in the
    detail; `no_regression: NAME` compares the variants with variant NAME."""
    scorers = [name for name, _ in result.scorers]
    if not result.variants:
        return check_gates(gates, result.summary, scorers=scorers, comparisons=comparisons)
    summaries = {name: result.variant(name).summary for name in result.variants}
    out = []
    for gate in gates:
        if gate.no_regression:
            out.append(_check(gate, result.summary, scorers, comparisons or {}))
            continue
        each = [(name, _check(gate, summary, scorers, {})) for name, summary in summaries.items()]
        holds: bool | None = all(one.holds for _, one in each)
        if any(one.holds is None for _, one in each):
            holds = None
        detail = "; ".join(f"{name}: {one.detail}" for name, one in each)
        out.append(GateResult(gate, holds, detail))
    return out


def _check(
    gate: Gate, summary: Any, scorers: Sequence[str], comparisons: dict[str, Any]
) -> GateResult:
    if gate.no_regression:
        if gate.no_regression not in comparisons:
            known = ", ".join(sorted(comparisons)) or "none: the eval has one variant"
            return GateResult(gate, None, f"no variant {gate.no_regression!r} to compare "
                              f"with (variants compared against: {known})")  # fmt: skip
        worse = [f"{c.b}: {s}" for c in comparisons[gate.no_regression] for s in c.regressions()]
        if worse:
            return GateResult(gate, False, "significantly worse: " + ", ".join(worse))
        return GateResult(gate, True, "no scorer significantly worse")
    if gate.subject == "passed":
        value = summary.pass_rate
    elif gate.subject in scorers:
        one = summary.scorers[gate.subject]
        value = one.mean_score if gate.measure == "mean" else one.pass_rate
    else:
        return GateResult(gate, None, f"no scorer {gate.subject!r} (scorers: "
                          f"{', '.join(['passed', *scorers])})")  # fmt: skip
    if value is None:
        return GateResult(gate, None, f"{gate.subject} has no decided run to measure")
    shown = f"{value:.2f}" if gate.measure == "mean" else f"{value * 100:.0f}%"
    holds = _OPS[gate.op](value, gate.threshold)
    return GateResult(gate, holds, f"{gate.subject}{'.mean' if gate.measure == 'mean' else ''}"
                      f" is {shown}")  # fmt: skip


def parse_gates(values: Sequence[Any], where: str = "--gate") -> list[Gate]:
    gates = []
    for value in values:
        try:
            gates.append(Gate.parse(value))
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
    return gates


def gates_of(result: Any, extra: Sequence[str] = ()) -> list[GateResult]:
    """The gates of an eval's result (`EvalResult.gates`): its eval file's `gate:` rules
    (read from the eval's folder) and `extra` ones ("passed >= 80%"), each checked; in an
    eval with variants, `no_regression: NAME` against variant NAME."""
    rules = [*parse_gates(_stored_gates(result), "gate"), *parse_gates(list(extra))]
    comparisons: dict[str, list[Any]] = {}
    if len(result.variants) > 1:
        comparisons[result.variants[0]] = result.comparisons()
        for rule in rules:
            if rule.no_regression in result.variants and rule.no_regression not in comparisons:
                comparisons[rule.no_regression] = result.comparisons(rule.no_regression)
    return check_result_gates(rules, result, comparisons)


def _stored_gates(result: Any) -> list[Any]:
    """The `gate:` of the eval file the eval ran ([] when it is not in a store)."""
    from awf_nb.evals.storage import EvalFolder
    from awf_nb.store import Store

    if not result.storage or not result.eval_id:
        return []
    gates = EvalFolder(Store(result.storage), result.eval_id).resolved().get("gate") or []
    return list(gates) if isinstance(gates, list) else []
