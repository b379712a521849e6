"""Per-case latency ratios of two candidates, with a confidence interval.

Each round of ``gemswatch ab`` times both candidates on the same cases, one
process each; a round's ratio for a case is ``B latency / A latency``. The
estimate is the geometric mean of the rounds' ratios with a two-sided 95 %
Student-t interval computed on their logarithms (a ratio's noise is
multiplicative), so with few rounds the interval is honestly wide. A case
differs significantly when its interval excludes 1. Pure: no clock, no files.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["CaseComparison", "compare_rounds", "t_quantile_975", "VERDICTS"]

# Two-sided 95 % quantiles of Student's t by degrees of freedom; between the
# listed ones the next smaller df is used (a slightly wider interval).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}

VERDICTS = ("B slower", "B faster", "no significant difference", "too few rounds")


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` (>= 1) degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[max(k for k in _T975 if k <= df)] if df <= 120 else 1.960


@dataclass(frozen=True)
class CaseComparison:
    """One case of an A/B comparison (latencies in ms, geometric means over rounds)."""

    case: str
    label: str
    rounds: int
    a_ms: float
    b_ms: float
    ratio: float  # B / A: above 1 means B is slower
    low: float | None  # the 95 % interval of the ratio; None with one round
    high: float | None
    verdict: str

    @property
    def significant(self) -> bool:
        return self.verdict in ("B slower", "B faster")

    def to_dict(self) -> dict[str, object]:
        return {"case": self.case, "label": self.label, "rounds": self.rounds, "a_ms": self.a_ms, "b_ms": self.b_ms,
                "ratio": self.ratio, "ci95": [self.low, self.high], "verdict": self.verdict,
                "significant": self.significant}


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def compare_rounds(a_rounds: list[dict[str, float]], b_rounds: list[dict[str, float]],
                   labels: dict[str, str] | None = None) -> list[CaseComparison]:
    """Per-case comparisons of paired rounds: ``a_rounds[i]`` and
    ``b_rounds[i]`` map case id -> latency (ms) of round i. A case counts in
    the rounds where both sides timed it with a positive latency. Cases come
    in the order A first timed them."""
    if len(a_rounds) != len(b_rounds):
        raise ValueError(f"A has {len(a_rounds)} rounds and B {len(b_rounds)}; rounds come in pairs")
    labels = labels or {}
    order: list[str] = []
    for r in a_rounds:
        order += [c for c in r if c not in order]
    out = []
    for case in order:
        pairs = [(a[case], b[case]) for a, b in zip(a_rounds, b_rounds)
                 if a.get(case, 0) > 0 and b.get(case, 0) > 0]
        if not pairs:
            continue
        logs = [math.log(b / a) for a, b in pairs]
        ratio = math.exp(statistics.fmean(logs))
        low = high = None
        verdict = "too few rounds"
        if len(logs) >= 2:
            half = t_quantile_975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
            low, high = ratio * math.exp(-half), ratio * math.exp(half)
            verdict = "B slower" if low > 1 else "B faster" if high < 1 else "no significant difference"
        out.append(CaseComparison(case, labels.get(case, case), len(pairs), _geomean([a for a, _ in pairs]),
                                  _geomean([b for _, b in pairs]), ratio, low, high, verdict))
    return out
