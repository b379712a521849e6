"""Status words and the verdict of one stage.

A stage's verdict comes from its exit code and its JSON report *together*:
neither alone can make a stage pass. ``decide`` is a pure function so every
rule below has a unit test; the caller reads the report and the log.
"""

from __future__ import annotations

import math
import re
import signal
from dataclasses import dataclass, field
from typing import Any

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
    "Cases",
    "Outcome",
    "Verdict",
    "decide",
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

# pytest exit codes
_OK, _TESTS_FAILED, _INTERRUPTED, _INTERNAL, _USAGE, _NO_TESTS = 0, 1, 2, 3, 4, 5


def gates(status: str) -> bool:
    """True when a stage with this status stops the later stages of its run.

    All-skipped correctness does not gate (DESIGN.md): it is no verdict
    either way, and the benchmark may still say something. Neither does a
    stage that had nothing to run (``not_run``: no selection for it).
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


@dataclass
class Verdict:
    """The classified result of one stage."""

    status: str
    message: str = ""
    cases: Cases = field(default_factory=Cases)
    candidate_calls: dict[str, int] = field(default_factory=dict)
    speedup: float | None = None
    speedups: dict[str, float] = field(default_factory=dict)
    first_failure: str | None = None
    detail: str = ""


# ---------------------------------------------------------------------------
# helpers


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _first_line(text: Any, limit: int = 240) -> str:
    if text is None:
        return ""
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _log_lines(log_tail: str) -> list[str]:
    return [_ANSI.sub("", ln).rstrip() for ln in (log_tail or "").splitlines()]


def _usage_error(log_tail: str) -> str:
    """The one-line reason pytest printed for a usage error (exit 4)."""
    lines = _log_lines(log_tail)
    for ln in lines:
        s = ln.strip()
        if s.startswith("ERROR:") and len(s) > 6:
            return s[6:].strip()
    # conftest import failures print "ImportError while loading conftest" and
    # the exception on an "E   " line.
    for ln in lines:
        s = ln.strip()
        if s.startswith("E ") and s[1:].strip():
            return s[1:].strip()
    return _last_meaningful(lines)


def _last_meaningful(lines: list[str]) -> str:
    for ln in reversed(lines):
        s = ln.strip()
        if s and not set(s) <= set("=-_ ") and not s.startswith("no tests ran"):
            return _first_line(s)
    return ""


def _first_failure_line(log_tail: str) -> str:
    """The first 'E ...' or 'FAILED ...' line of a pytest log."""
    lines = _log_lines(log_tail)
    for ln in lines:
        s = ln.strip()
        if s.startswith("FAILED ") or s.startswith("ERROR "):
            return _first_line(s)
    for ln in lines:
        s = ln.strip()
        if s.startswith("E ") and s[1:].strip():
            return _first_line(s[1:])
    return _last_meaningful(lines)


_UNUSED_HINTS = ("never invoked", "never called", "not invoked", "was never used")
_OVERRIDE_LOAD_HINTS = (
    "failed to override",
    "error loading config",
    "error parsing override spec",
    "failed to load implementation",
)


def _matches_op(key: str, op: str) -> bool:
    """'gemswatch.gems.softmax' and 'flag_gems.softmax' both belong to softmax."""
    return key == op or key.endswith("." + op)


def _geomean(values: list[float]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _failed_at(v: Verdict, first_failure: str, summary: str, detail: str) -> Verdict:
    """``v`` as FAILED at its first failing case."""
    v.status = FAILED
    v.first_failure = first_failure
    v.message = f"{first_failure}: {summary}"
    v.detail = detail
    return v


def _exited_nonzero(v: Verdict, log_tail: str) -> Verdict:
    """pytest exited 1 although every case passed: a candidate reported
    unused, else a failure outside the cases."""
    if any(h in log_tail.lower() for h in _UNUSED_HINTS):
        return Verdict(UNCALLED, _first_failure_line(log_tail), cases=v.cases, candidate_calls=v.candidate_calls)
    v.status = FAILED
    v.message = "pytest exited 1 although every case passed: " + _first_failure_line(log_tail)
    return v


# ---------------------------------------------------------------------------
# the decision


def decide(
    stage: str,
    outcome: Outcome,
    report: Any,
    operators: list[str],
    log_tail: str = "",
    report_error: str | None = None,
) -> Verdict:
    """Classify one finished stage.

    Args:
        stage: ``preflight``, ``correctness`` or ``benchmark``.
        outcome: how the process ended (exit code, timeout, cancellation).
        report: the parsed JSON report, or None when there was none.
        operators: the operators the candidate was mapped to.
        log_tail: the end of the stage's combined stdout/stderr.
        report_error: why the report could not be read, if it could not.

    Returns:
        A Verdict whose status is one of the DESIGN.md status words.
    """
    if outcome.cancelled:
        return Verdict(SUPERSEDED, outcome.cancel_reason or "superseded by a newer save")
    if outcome.log_limit:
        return Verdict(
            CRASHED,
            f"the stage wrote more than {outcome.log_limit >> 20} MiB of output and was stopped "
            "(is the candidate printing in a loop?); the log keeps its head and tail",
        )
    if outcome.timed_out:
        limit = f" of {outcome.timeout_s:g} s" if outcome.timeout_s else ""
        return Verdict(TIMEOUT, f"{stage} exceeded its time limit{limit}; stopped")
    if outcome.spawn_error:
        return Verdict(ERROR, f"could not start the stage: {outcome.spawn_error}")
    rc = outcome.returncode
    if rc is None:
        return Verdict(CRASHED, "the stage process vanished without an exit status")
    if rc < 0:
        return Verdict(CRASHED, f"killed by {_signal_name(-rc)}", detail=_first_failure_line(log_tail))
    if rc == _USAGE:
        return Verdict(ERROR, _usage_error(log_tail) or "pytest usage error (exit 4)")
    if rc == _INTERNAL:
        low = log_tail.lower()
        msg = _first_failure_line(log_tail)
        if any(h in low for h in _OVERRIDE_LOAD_HINTS):
            return Verdict(ERROR, msg or "the candidate could not be loaded (pytest exit 3)")
        return Verdict(CRASHED, f"pytest internal error (exit 3): {msg}".rstrip(": "))
    if rc == _INTERRUPTED:
        # Collection errors (a broken test or benchmark file) end with exit 2.
        msg = _first_failure_line(log_tail)
        if "error" in log_tail.lower() and "collect" in log_tail.lower():
            return Verdict(ERROR, f"collection error: {msg}" if msg else "collection error")
        return Verdict(CRASHED, f"interrupted (exit 2): {msg}".rstrip(": "))
    if rc == _NO_TESTS:
        return Verdict(
            ERROR,
            f"no {stage} cases were selected (pytest exit 5): check the operator's "
            "selection and marker in config.yaml",
        )
    if rc not in (_OK, _TESTS_FAILED):
        msg = _first_failure_line(log_tail)
        return Verdict(CRASHED, f"exited with code {rc}" + (f": {msg}" if msg else ""))
    if report is None:
        why = f" ({report_error})" if report_error else ""
        msg = _first_failure_line(log_tail)
        return Verdict(
            CRASHED,
            f"exited {rc} without a valid report{why}" + (f": {msg}" if msg else ""),
        )
    if stage == "preflight":
        return _decide_preflight(rc, report, operators, log_tail)
    if stage == "correctness":
        return _decide_correctness(rc, report, operators, log_tail)
    if stage == "benchmark":
        return _decide_benchmark(rc, report, operators, log_tail)
    raise ValueError(f"unknown stage {stage!r}")


def _decide_preflight(rc: int, report: Any, operators: list[str], log_tail: str) -> Verdict:
    if not isinstance(report, dict) or not isinstance(report.get("records"), list):
        return Verdict(CRASHED, "preflight report has no 'records' list")
    records = [r for r in report["records"] if isinstance(r, dict)]
    cases = Cases()
    calls: dict[str, int] = {op: 0 for op in operators}
    first_fail: dict | None = None
    op_seen: dict[str, list[dict]] = {op: [] for op in operators}
    for r in records:
        ok = r.get("status") == "passed"
        if ok:
            cases.passed += 1
        else:
            cases.failed += 1
            first_fail = first_fail or r
        name = str(r.get("operator") or "")
        for op in operators:
            if name == op or name.startswith(op + "_backward"):
                op_seen[op].append(r)
                if r.get("override"):
                    calls[op] += int(r.get("count") or 0)
    v = Verdict(PASSED, cases=cases, candidate_calls=calls)
    if first_fail is not None:
        return _failed_at(
            v,
            str(first_fail.get("case_id") or first_fail.get("nodeid") or ""),
            _first_line(first_fail.get("error")) or "failed",
            str(first_fail.get("error") or ""),
        )
    if not records:
        v.status = FAILED
        v.message = "no preflight cases ran: " + (_first_failure_line(log_tail) or "empty report")
        return v
    for op in operators:
        seen = op_seen[op]
        if not seen:
            v.status = UNCALLED
            v.message = f"no preflight case exercised {op} (the benchmark selection runs other operators)"
            return v
        if not any(r.get("override") for r in seen):
            v.status = UNCALLED
            v.message = f"preflight ran {op} without the candidate (override: false)"
            return v
        if calls[op] <= 0:
            v.status = UNCALLED
            v.message = f"preflight never called the candidate for {op} (count 0)"
            return v
    if rc != _OK:
        return _exited_nonzero(v, log_tail)
    return v


def _correctness_records(report: Any) -> tuple[list[dict], dict] | None:
    """(records, extra) from our schema or from an upstream nodeid-keyed dict."""
    if not isinstance(report, dict):
        return None
    if isinstance(report.get("records"), list):
        return [r for r in report["records"] if isinstance(r, dict)], report
    if "schema_version" in report:
        return None
    # upstream FlagGems: {nodeid: {params, result, opname, reason, candidate_calls}}
    records = []
    for nodeid, entry in report.items():
        if isinstance(entry, dict):
            records.append({"nodeid": nodeid, **entry})
    return records, {}


def _decide_correctness(rc: int, report: Any, operators: list[str], log_tail: str) -> Verdict:
    parsed = _correctness_records(report)
    if parsed is None:
        return Verdict(CRASHED, "correctness report is not in a known format")
    records, extra = parsed
    cases = Cases()
    calls: dict[str, int] = {op: 0 for op in operators}
    first_fail: dict | None = None
    first_skip: dict | None = None
    for r in records:
        result = r.get("result")
        if result == "passed":
            cases.passed += 1
        elif result == "skipped":
            cases.skipped += 1
            first_skip = first_skip or r
        else:  # failed, error, or None (a setup error upstream)
            cases.failed += 1
            first_fail = first_fail or r
        for key, n in (r.get("candidate_calls") or {}).items():
            for op in operators:
                if _matches_op(str(key), op) and isinstance(n, int):
                    calls[op] += n
    v = Verdict(PASSED, cases=cases, candidate_calls=calls)
    if first_fail is not None:
        text = first_fail.get("message") or first_fail.get("reason") or (
            "setup error" if first_fail.get("result") in (None, "error") else "failed"
        )
        return _failed_at(v, str(first_fail.get("nodeid") or ""), _first_line(text), str(text))
    if not records:
        v.status = ERROR
        v.message = "no test cases ran: check the operator's tests and marker in config.yaml"
        return v
    if cases.passed == 0:
        v.status = ALL_SKIPPED
        reason = _first_line(first_skip.get("reason")) if first_skip else ""
        v.message = f"all {cases.skipped} cases skipped" + (f": {reason}" if reason else "")
        return v
    declared = [str(u) for u in (extra.get("uncalled") or [])]
    uncalled = [op for op in operators if calls[op] <= 0 or any(_matches_op(u, op) for u in declared)]
    if uncalled:
        op = uncalled[0]
        v.status = UNCALLED
        v.message = (
            f"{op}: the candidate was never called by the {cases.passed} executed cases "
            "(is the operator name right, and do its tests call it?)"
        )
        return v
    if rc != _OK:
        return _exited_nonzero(v, log_tail)
    declared_status = extra.get("status")
    if declared_status in (FAILED, UNCALLED, ERROR):
        v.status = declared_status
        # e.g. an integrity check that failed outside any test call
        v.message = _first_line(extra.get("message")) or f"the report says {declared_status}"
    return v


def _benchmark_cases(report: Any) -> list[dict] | None:
    """Flatten either benchmark schema into case dicts with an 'operator' key."""
    if not isinstance(report, dict):
        return None
    out: list[dict] = []
    if isinstance(report.get("benchmarks"), list):
        for b in report["benchmarks"]:
            if not isinstance(b, dict):
                continue
            for c in b.get("cases") or []:
                if isinstance(c, dict):
                    out.append({"operator": b.get("operator"), "nodeid": b.get("nodeid"), **c})
        return out
    if "schema_version" in report:
        return None
    # upstream: {opid: {details: [{op_name, result: [metrics...]}], result, reason, test_case}}
    for opid, entry in report.items():
        if not isinstance(entry, dict):
            continue
        for d in entry.get("details") or []:
            if not isinstance(d, dict):
                continue
            for m in d.get("result") or []:
                if isinstance(m, dict):
                    out.append(
                        {
                            "operator": d.get("op_name") or opid,
                            "nodeid": entry.get("test_case"),
                            "error": m.get("error_msg"),
                            **m,
                        }
                    )
    return out


def _decide_benchmark(rc: int, report: Any, operators: list[str], log_tail: str) -> Verdict:
    cases_list = _benchmark_cases(report)
    if cases_list is None:
        return Verdict(CRASHED, "benchmark report is not in a known format")
    cases = Cases()
    calls: dict[str, int] = {op: 0 for op in operators}
    per_op: dict[str, list[float]] = {op: [] for op in operators}
    first_fail: dict | None = None
    for c in cases_list:
        if c.get("error"):
            cases.failed += 1
            first_fail = first_fail or c
            continue
        cases.passed += 1
        for op in operators:
            if str(c.get("operator") or "") in (op, op + "_backward"):
                if c.get("candidate_source") == "override":
                    calls[op] += 1
                    if isinstance(c.get("speedup"), (int, float)):
                        per_op[op].append(float(c["speedup"]))
    speedups = {op: g for op in operators if (g := _geomean(per_op[op])) is not None}
    v = Verdict(PASSED, cases=cases, candidate_calls=calls, speedups=speedups)
    v.speedup = _geomean(list(speedups.values()))
    if first_fail is not None:
        return _failed_at(
            v,
            str(first_fail.get("case_id") or first_fail.get("nodeid") or ""),
            _first_line(first_fail.get("error")),
            str(first_fail.get("error")),
        )
    if not cases_list:
        v.status = FAILED
        v.message = "the benchmark timed no case: " + (_first_failure_line(log_tail) or "empty report")
        return v
    for op in operators:
        if calls[op] == 0:
            v.status = UNCALLED
            v.message = f"no benchmark case timed the candidate for {op} (candidate_source is not 'override')"
            return v
    if rc != _OK:
        v.status = FAILED
        v.message = "pytest exited 1: " + _first_failure_line(log_tail)
        return v
    if report.get("interpreted"):
        v.message = "CPU interpreter timings: compare ratios only"
    return v
