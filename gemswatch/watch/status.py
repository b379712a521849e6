"""Status words: what a stage or a run ended as, and what each word implies.

The words are a contract shared by the dashboard, the event stream, the
history file and ``gemswatch run``'s exit code (docs/watch.md lists them).
Pure functions only; how a finished stage gets its word is
:mod:`gemswatch.watch.stage.verdict`.
"""

from __future__ import annotations

__all__ = [
    "STAGES",
    "QUEUED",
    "RUNNING",
    "PASSED",
    "FAILED",
    "ALL_SKIPPED",
    "UNCALLED",
    "ERROR",
    "CRASHED",
    "TIMEOUT",
    "SUPERSEDED",
    "NOT_RUN",
    "STATUSES",
    "FINAL_STATUSES",
    "FAILURES",
    "gates",
    "is_failure",
    "overall_status",
]

STAGES = ("preflight", "correctness", "benchmark")

QUEUED = "queued"
RUNNING = "running"
PASSED = "passed"
FAILED = "failed"
ALL_SKIPPED = "all_skipped"
UNCALLED = "uncalled"
ERROR = "error"
CRASHED = "crashed"
TIMEOUT = "timeout"
SUPERSEDED = "superseded"
NOT_RUN = "not_run"

STATUSES = (
    QUEUED,
    RUNNING,
    PASSED,
    FAILED,
    ALL_SKIPPED,
    UNCALLED,
    ERROR,
    CRASHED,
    TIMEOUT,
    SUPERSEDED,
    NOT_RUN,
)
FINAL_STATUSES = STATUSES[2:]
# Statuses that make `gemswatch run` exit 1.
FAILURES = frozenset({FAILED, UNCALLED, ERROR, CRASHED, TIMEOUT})


def gates(status: str) -> bool:
    """True when a stage with this status stops the later stages of its run.

    An all-skipped correctness does not gate: it is no verdict either way,
    and the benchmark may still say something (it is shown as all skipped,
    never as passed). Neither does a stage that had nothing to run
    (``not_run``: no selection for it).
    """
    return status not in (PASSED, ALL_SKIPPED, NOT_RUN)


def is_failure(status: str) -> bool:
    """True for the statuses that count as a failed stage (exit 1)."""
    return status in FAILURES


def overall_status(stage_statuses: list[str]) -> str:
    """One word for a whole run: its first non-passing stage, else passed.

    ``not_run`` stages are consequences, not causes, and are skipped; a run
    whose stages all passed except an all-skipped one is ``all_skipped``.
    """
    real = [s for s in stage_statuses if s != NOT_RUN]
    if not real:
        return NOT_RUN
    for s in real:
        if s not in (PASSED, ALL_SKIPPED):
            return s
    return ALL_SKIPPED if ALL_SKIPPED in real else PASSED
