"""Summary figures of timed cases: the geometric-mean speedup.

Owns :func:`geomean` and :func:`summarize`, shared by the runner (one
benchmark's summary) and the reports (one operator's over all its
benchmarks). Imports only the standard library: never the runner, the
plugin, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["geomean", "summarize"]


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
