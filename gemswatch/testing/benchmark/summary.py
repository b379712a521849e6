"""Summary figures of timed cases: the geometric-mean speedup.

Owns :func:`geomean` and :func:`summarize`, shared by the runner (one
benchmark's summary) and the reports (one operator's over all its
benchmarks). Imports only the standard library: never the runner, the
plugin, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["extra_geomeans", "geomean", "summarize"]


def geomean(values: list[float]) -> float | None:
    """Geometric mean of the positive finite values, None when there are none."""
    good = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not good:
        return None
    return math.exp(sum(math.log(v) for v in good) / len(good))


def summarize(cases: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float | None, str | None]:
    """(cases without error, their geomean speedup, candidate_source): the
    source is "override" only when every good case timed the injected candidate."""
    good = [c for c in cases if c["error"] is None]
    sources = {c["candidate_source"] for c in good}
    return good, geomean([c["speedup"] for c in good]), "override" if good and sources == {"override"} else None


# The per-case ratios each benchmark and operator also gives a geomean of.
_EXTRA_RATIOS = (("speedup_compile", "geomean_speedup_compile"), ("speedup_best", "geomean_speedup_best"),
                 ("speedup_gems", "geomean_speedup_gems"), ("headline_speedup", "geomean_headline"))


def extra_geomeans(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomeans of the other baselines' ratios over the cases without error,
    and the baseline the headline is against (the cases' own, when they agree;
    ``mixed`` when they do not)."""
    good = [c for c in cases if c["error"] is None]
    out: dict[str, Any] = {name: geomean([c.get(key) for c in good]) for key, name in _EXTRA_RATIOS}
    against = {c.get("headline_vs") for c in good if c.get("headline_vs")}
    out["headline_vs"] = against.pop() if len(against) == 1 else ("mixed" if against else None)
    return out
