"""The latest result of each candidate, as ``gemswatch run`` reports it at
the end and the ``watch_stopped`` event carries it."""

from __future__ import annotations

from typing import Any, Mapping

from .events import headline
from .mapping import Candidate
from .status import NOT_RUN, PASSED, STAGES

__all__ = ["latest_result"]


def latest_result(
    cand: Candidate, run: Mapping[str, Any] | None, stage_records: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``cand``'s last ``run_finished`` record ``run`` (None: never run) and
    its latest ``stage_finished`` records, as one summary entry; stage
    records of an older run than ``run`` are left out."""
    stages = {
        s: rec for s, rec in stage_records.items() if run is not None and rec.get("run_id") == run.get("run_id")
    }
    first_problem = next(
        (stages[s].get("message") for s in STAGES if s in stages and stages[s].get("status") not in (PASSED, NOT_RUN)),
        "",
    )
    ratio, vs = headline(stages.get("benchmark") or {})  # the ratio the benchmark is judged by, and against what
    return {
        "candidate": cand.rel,
        "operators": cand.ops,
        "status": run.get("status") if run else None,
        "stages": {s: stages[s]["status"] for s in STAGES if s in stages},
        "speedup": ratio,
        "speedup_vs": vs,
        "message": first_problem,
    }
