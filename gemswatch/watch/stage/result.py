"""What a stage ended as: its process's end (:class:`Outcome`) and its typed
result (:class:`StageResult`), which carries everything the event, the
history line and the dashboard show, so nothing is re-read or re-added on
the way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tamper import Tampered

__all__ = ["Cases", "Outcome", "StageResult", "DETAIL_CHARS", "LOG_TAIL_CHARS"]

# How much of a failure's detail and of its log's end an event carries.
DETAIL_CHARS = 2000
LOG_TAIL_CHARS = 4000
SKIP_REASONS = 5  # the most common reasons a stage_finished event names
PER_CASE_ROWS = 64  # a benchmark's worst cases a stage_finished event keeps
FAILURE_GROUPS = 12  # a correctness stage's largest failure groups an event keeps


@dataclass
class Cases:
    """Case counts of one stage."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped

    def to_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "total": self.total,
        }


@dataclass
class Outcome:
    """How a stage process ended, as the runner saw it."""

    returncode: int | None
    duration_s: float = 0.0
    timed_out: bool = False
    cancelled: bool = False
    cancel_reason: str = ""
    spawn_error: str | None = None
    timeout_s: float | None = None
    warm: bool = False  # forked from the warm pool rather than started cold
    log_limit: int | None = None  # set when the stage was stopped for writing more output than this
    oom_killed: bool = False  # the kernel's OOM killer killed a process of gemswatch's cgroup meanwhile
    # Set by an executor that runs the stage elsewhere (a Ray cluster):
    lost: str = ""  # why the stage's worker or node was lost before it could say how the stage ended
    device: str | None = None  # the device the stage really ran on, when the plan's is only a slot
    tampered: tuple[Tampered, ...] = ()  # judged-by files the stage changed where it ran (already put back)


@dataclass(frozen=True)
class StageResult:
    """A finished stage: the verdict plus where to look.

    ``log_tail`` is the end of the log of a stage that did not pass (empty
    otherwise); ``speedup_prev`` is the candidate's previous passing
    speedup, added by the session, which alone knows it.
    """

    stage: str
    status: str
    exit_code: int | None = None
    duration_s: float = 0.0
    cases: Cases = field(default_factory=Cases)
    candidate_calls: dict[str, int] = field(default_factory=dict)
    speedup: float | None = None
    speedups: dict[str, float] = field(default_factory=dict)
    report: str | None = None
    log: str | None = None
    message: str = ""
    detail: str = ""
    first_failure: str | None = None
    command: tuple[str, ...] | None = None
    device: str | None = None
    warm: bool = False  # forked from the warm pool
    log_tail: str = ""
    speedup_prev: float | None = None
    seed: int | None = None  # of a correctness stage's drawn cases (replay: --seed)
    skips: dict[str, int] = field(default_factory=dict)  # why cases were skipped: reason -> count
    # A benchmark's timed cases, worst first (case, label, latency_ms, base_ms,
    # speedup, pct_of_copy, tflops; ``prev``: the case's speedup at the
    # candidate's previous passing benchmark, added by the session).
    per_case: tuple[dict[str, Any], ...] = ()
    # A benchmark's geomean against its headline baseline and which that is
    # ("best" of torch eager and torch.compile on a GPU, "gems" under the
    # CPU interpreter, "eager" without a compile figure, "mixed").
    headline_speedup: float | None = None
    headline_vs: str | None = None
    headline_speedups: dict[str, float] = field(default_factory=dict)  # per operator
    # A correctness stage's failed cases by test function and dtype, most
    # first (FailureGroup.to_dict: test, dtype, failed, of, cases, shapes,
    # error, worst_case, worst_rel_err, worst_abs_err, worst_shape, worst_index).
    failure_groups: tuple[dict[str, Any], ...] = ()
    # A correctness stage's coverage, per operator (the report's: cases,
    # size_class, dtype, layout, dtypes_by_size_class).
    coverage: dict[str, Any] = field(default_factory=dict)

    def event_fields(self) -> dict[str, Any]:
        """The ``stage_finished`` fields of this result (docs/watch.md)."""
        fields: dict[str, Any] = {
            "stage": self.stage,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration_s": round(self.duration_s, 3),
            "cases": self.cases.to_dict(),
            "candidate_calls": self.candidate_calls,
            "speedup": self.speedup,  # unrounded: a 150x slowdown is 0.00667, not 0.0067
            "report": self.report,
            "log": self.log,
            "message": self.message,
            "warm": self.warm,
            "device": self.device,
        }
        if self.seed is not None:
            fields["seed"] = self.seed
        if self.skips:
            fields["skips"] = dict(sorted(self.skips.items(), key=lambda kv: -kv[1])[:SKIP_REASONS])
        if self.first_failure:
            fields["first_failure"] = self.first_failure
        if self.failure_groups:
            fields["failure_groups"] = [dict(g) for g in self.failure_groups[:FAILURE_GROUPS]]
        if self.coverage:
            fields["coverage"] = dict(self.coverage)
        if self.detail:
            fields["detail"] = self.detail[:DETAIL_CHARS]
        if self.log_tail:
            fields["log_tail"] = self.log_tail[-LOG_TAIL_CHARS:]
        if self.stage == "benchmark":
            fields["speedups"] = dict(self.speedups)
            fields["per_case"] = [dict(c) for c in self.per_case[:PER_CASE_ROWS]]
            fields["speedup_prev"] = self.speedup_prev
            fields["headline_speedup"] = self.headline_speedup  # unrounded, like speedup
            fields["headline_vs"] = self.headline_vs
            fields["headline_speedups"] = dict(self.headline_speedups)
        return fields
