"""The statistics of a paired comparison: is variant B better than A, or is that noise?

Plain Python (no numpy or scipy needed), checked against textbook values in
tests/evals/test_compare_stats.py:

- `paired_bootstrap`: the mean of per-case differences with a percentile confidence
  interval from resampling *cases* (not runs) with replacement, `resamples` times, from a
  seeded generator, so the same data always gives the same interval;
- `mcnemar_exact`: McNemar's exact test on the discordant pairs of pass/fail verdicts
  (b cases passed only in A, c only in B): the two-sided binomial p-value of
  min(b, c) successes in b + c trials with p = 1/2;
- `holm`: Holm's step-down adjustment of several p-values (one per comparison made), so
  more scorers or variants do not make a chance difference look significant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0
# Fewer cases than this and no verdict is given, whatever the interval says.
MIN_CASES = 10


@dataclass(frozen=True)
class Bootstrap:
    """The mean difference over cases and its confidence interval."""

    mean: float
    low: float
    high: float
    p_value: float  # two-sided: twice the smaller share of resampled means on either side of 0

    @property
    def covers_zero(self) -> bool:
        return self.low <= 0.0 <= self.high


def paired_bootstrap(
    differences: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Bootstrap:
    """Resample the per-case differences; the interval is the percentile one."""
    n = len(differences)
    if n == 0:
        raise ValueError("a bootstrap needs at least one case")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    resamples = max(1, resamples)
    values = [float(d) for d in differences]
    mean = math.fsum(values) / n
    if all(v == values[0] for v in values):  # no spread: every resample is the same mean
        return Bootstrap(mean, mean, mean, 1.0 if mean == 0 else 0.0)
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1.0 - tail) * resamples) - 1)]
    below = sum(1 for m in means if m <= 0.0) / resamples
    above = sum(1 for m in means if m >= 0.0) / resamples
    return Bootstrap(mean, low, high, min(1.0, 2.0 * min(below, above)))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: `only_a` cases passed in A alone, `only_b` in B."""
    if only_a < 0 or only_b < 0:
        raise ValueError("counts of discordant pairs cannot be negative")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    # int / int: exact for any n (a float 2.0**n overflows past n = 1023)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the given order (None stays None and is not counted)."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
