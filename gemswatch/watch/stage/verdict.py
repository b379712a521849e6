"""The verdict of one finished stage: exit code + report -> a status word.

A stage's verdict comes from its exit code and its JSON report *together*:
neither alone can make a stage pass. This is the one place that reads the
reports, ours (``gemswatch.correctness/v1``, the benchmark plugin's
schemas) and upstream FlagGems' (nodeid-keyed correctness results, the
operator-keyed benchmark results), so a checkout of either kind is judged by
the same rules. ``decide`` is a pure function so every rule has a unit test;
the caller reads the report and the log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..events import headline
from ..status import ALL_SKIPPED, CRASHED, ERROR, FAILED, PASSED, SUPERSEDED, TIMEOUT, UNCALLED
from .failure_groups import FailureGroup, group_failures
from .pytest_log import PROTOCOL_OPTIONS, first_failure_line, first_line, missing_protocol, signal_name, usage_error
from .result import Cases, Outcome

__all__ = ["Verdict", "decide"]

# pytest exit codes
_OK, _TESTS_FAILED, _INTERRUPTED, _INTERNAL, _USAGE, _NO_TESTS = 0, 1, 2, 3, 4, 5


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
    seed: int | None = None  # of the correctness stage's drawn cases
    skips: dict[str, int] = field(default_factory=dict)  # why cases were skipped: reason -> count
    per_case: list[dict[str, Any]] = field(default_factory=list)  # the benchmark's timed cases, worst first
    headline_speedup: float | None = None  # geomean against the headline baseline (best of eager/compile, or gems)
    headline_vs: str | None = None  # that baseline: "best", "eager", "gems" or "mixed"
    headline_speedups: dict[str, float] = field(default_factory=dict)  # the same per operator
    failure_groups: list[FailureGroup] = field(default_factory=list)  # a correctness stage's failures by test and dtype
    coverage: dict[str, Any] = field(default_factory=dict)  # a correctness report's: operator -> axes its cases covered


# ---------------------------------------------------------------------------
# helpers


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


def _failed_at(v: Verdict, first_failure: str, summary: str, detail: str, shown: str = "") -> Verdict:
    """``v`` as FAILED at its first failing case (``shown``: the case as a
    reader knows it, when the id is a hash)."""
    v.status = FAILED
    v.first_failure = first_failure
    v.message = f"{shown or first_failure}: {summary}"
    v.detail = detail
    return v


def _exited_nonzero(v: Verdict, log_tail: str) -> Verdict:
    """pytest exited 1 although every case passed: a candidate reported
    unused, else a failure outside the cases."""
    if any(h in log_tail.lower() for h in _UNUSED_HINTS):
        return Verdict(UNCALLED, first_failure_line(log_tail), cases=v.cases, candidate_calls=v.candidate_calls,
                       seed=v.seed)
    v.status = FAILED
    v.message = "pytest exited 1 although every case passed: " + first_failure_line(log_tail)
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
        A Verdict whose status is one of the status words of :mod:`gemswatch.watch.status`.
    """
    v = _decide(stage, outcome, report, operators, log_tail, report_error)
    if outcome.oom_killed and v.status == CRASHED and "killed by SIGKILL" in v.message:
        # The kernel said so: name the cause, not only the signal.
        v.message = v.message.replace(
            "killed by SIGKILL", "killed by the kernel's out-of-memory killer (SIGKILL): it ran out of memory")
    return v


def _decide(stage: str, outcome: Outcome, report: Any, operators: list[str], log_tail: str,
            report_error: str | None) -> Verdict:
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
    if outcome.lost:
        return Verdict(CRASHED, outcome.lost)
    if outcome.spawn_error:
        return Verdict(ERROR, f"could not start the stage: {outcome.spawn_error}")
    rc = outcome.returncode
    if rc is None:
        return Verdict(CRASHED, "the stage process vanished without an exit status")
    if rc < 0:
        return Verdict(CRASHED, f"killed by {signal_name(-rc)}", detail=first_failure_line(log_tail))
    if rc == _USAGE:
        missing = missing_protocol(log_tail)
        if missing:
            return Verdict(ERROR, (
                f"the checkout (config.yaml's project:) predates gemswatch's override protocol: its pytest does not "
                f"know {', '.join(missing)}; point project: at a checkout whose tests/ and benchmark/ accept "
                f"{', '.join(PROTOCOL_OPTIONS)} (a FlagGems revision with the protocol), or at gemswatch's own suites"
            ), detail=next((ln.strip() for ln in log_tail.splitlines() if "unrecognized arguments:" in ln), ""))
        return Verdict(ERROR, usage_error(log_tail) or "pytest usage error (exit 4)")
    if rc == _INTERNAL:
        low = log_tail.lower()
        msg = first_failure_line(log_tail)
        if any(h in low for h in _OVERRIDE_LOAD_HINTS):
            return Verdict(ERROR, msg or "the candidate could not be loaded (pytest exit 3)")
        return Verdict(CRASHED, f"pytest internal error (exit 3): {msg}".rstrip(": "))
    if rc == _INTERRUPTED:
        # Collection errors (a broken test or benchmark file) end with exit 2.
        msg = first_failure_line(log_tail)
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
        msg = first_failure_line(log_tail)
        return Verdict(CRASHED, f"exited with code {rc}" + (f": {msg}" if msg else ""))
    if report is None:
        why = f" ({report_error})" if report_error else ""
        msg = first_failure_line(log_tail)
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


def _worker_died(report: Any) -> Verdict | None:
    """CRASHED when the judge lived on but the candidate's worker process died
    under it (the report's status says so, its problems say how)."""
    if not isinstance(report, dict) or report.get("status") != CRASHED:
        return None
    died = [p for p in report.get("problems") or [] if isinstance(p, str) and "worker process died" in p]
    return Verdict(CRASHED, first_line(died[0] if died else report.get("message")) or "the candidate's worker process died")


def _decide_preflight(rc: int, report: Any, operators: list[str], log_tail: str) -> Verdict:
    if not isinstance(report, dict) or not isinstance(report.get("records"), list):
        return Verdict(CRASHED, "preflight report has no 'records' list")
    died = _worker_died(report)
    if died is not None:
        return died
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
            first_line(first_fail.get("error")) or "failed",
            str(first_fail.get("error") or ""),
            _shown_case(first_fail),
        )
    if not records:
        v.status = FAILED
        v.message = "no preflight cases ran: " + (first_failure_line(log_tail) or "empty report")
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
    if extra.get("status") == CRASHED:
        # The judge lived on, but the candidate's worker process died under it.
        return Verdict(CRASHED, first_line(extra.get("message")) or "the candidate's worker process died")
    cases = Cases()
    calls: dict[str, int] = {op: 0 for op in operators}
    first_fail: dict | None = None
    first_skip: dict | None = None
    skips: dict[str, int] = {}
    for r in records:
        result = r.get("result")
        if result == "passed":
            cases.passed += 1
        elif result == "skipped":
            cases.skipped += 1
            first_skip = first_skip or r
            reason = first_line(r.get("reason")) or "no reason given"
            skips[reason] = skips.get(reason, 0) + 1
        else:  # failed, error, or None (a setup error upstream)
            cases.failed += 1
            first_fail = first_fail or r
        for key, n in (r.get("candidate_calls") or {}).items():
            for op in operators:
                if _matches_op(str(key), op) and isinstance(n, int):
                    calls[op] += n
    seed = extra.get("seed")
    coverage = extra.get("coverage")
    v = Verdict(PASSED, cases=cases, candidate_calls=calls,
                seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None, skips=skips,
                coverage={str(k): e for k, e in coverage.items() if isinstance(e, dict)} if isinstance(coverage, dict) else {})
    if first_fail is not None:
        text = first_fail.get("message") or first_fail.get("reason") or (
            "setup error" if first_fail.get("result") in (None, "error") else "failed"
        )
        v.failure_groups = group_failures(records)
        nodeid = str(first_fail.get("nodeid") or "")
        case = first_fail.get("case")
        shown = nodeid.rsplit("::", 1)[0] + "::" + case if isinstance(case, str) and case and "::" in nodeid else ""
        return _failed_at(v, nodeid, first_line(text), str(text), shown if shown != nodeid else "")
    if not records:
        v.status = ERROR
        v.message = "no test cases ran: check the operator's tests and marker in config.yaml"
        return v
    if cases.passed == 0:
        v.status = ALL_SKIPPED
        reason = first_line(first_skip.get("reason")) if first_skip else ""
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
        v.message = first_line(extra.get("message")) or f"the report says {declared_status}"
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


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def case_label(c: dict[str, Any]) -> str:
    """A benchmark case as a reader knows it: dtype, shapes and parameters."""
    shape = c.get("shape")
    shapes = " ".join(f"{k}={_dims(v)}" for k, v in shape.items()) if isinstance(shape, dict) else str(shape or "")
    params = c.get("params")
    extra = " ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, dict) else ""
    return " ".join(str(p) for p in (c.get("dtype") or "", shapes, extra) if p)


def _dims(value: Any) -> str:
    """A shape entry as written: a tensor's dims as a list, a size (mm's M) as it is."""
    return str(list(value)) if isinstance(value, (list, tuple)) else str(value)


def _shown_case(c: dict[str, Any]) -> str:
    """``operator dtype shapes params`` of a benchmark case record that names them, else ''."""
    if not c.get("dtype") and not c.get("shape"):
        return ""
    return " ".join(p for p in (str(c.get("operator") or ""), case_label(c)) if p)


# Per-case report fields a row carries as they are (numbers), under its own name.
_ROW_NUMBERS = (
    ("compile_ms", "latency_compile"), ("gems_ms", "latency_gems"), ("compile_s", "compile_s"),
    ("speedup_compile", "speedup_compile"), ("speedup_best", "speedup_best"), ("speedup_gems", "speedup_gems"),
    ("headline_speedup", "headline_speedup"), ("gbps", "gbps"), ("pct_of_roofline", "pct_of_roofline"),
)
_ROW_BYTES = ("peak_mem_bytes", "peak_mem_base_bytes")
_ROW_WORDS = ("headline_vs", "roofline_bound", "determinism")


def _worst_first(row: dict[str, Any]) -> tuple[bool, float]:
    ratio = headline(row)[0]
    return ratio is None, ratio or 0.0


def per_case_rows(cases: list[dict]) -> list[dict[str, Any]]:
    """The candidate's timed cases, worst first (by the headline ratio, else
    the speedup against torch): what the dashboard's per-shape table shows
    (latencies in ms)."""
    rows = []
    for c in cases:
        if c.get("candidate_source") != "override" or c.get("error"):
            continue
        row = {
            "case": str(c.get("case_id") or ""),
            "operator": str(c.get("operator") or ""),
            "label": case_label(c),
            "latency_ms": _number(c.get("latency")),
            "base_ms": _number(c.get("latency_base")),
            "speedup": _number(c.get("speedup")),
            "pct_of_copy": _number(c.get("pct_of_copy")),
            "tflops": _number(c.get("tflops")),
        }
        row.update({name: _number(c.get(key)) for name, key in _ROW_NUMBERS})
        row.update({name: int(c[name]) if _number(c.get(name)) is not None else None for name in _ROW_BYTES})
        row.update({name: c[name] if isinstance(c.get(name), str) else None for name in _ROW_WORDS})
        rows.append(row)
    return sorted(rows, key=_worst_first)


def _decide_benchmark(rc: int, report: Any, operators: list[str], log_tail: str) -> Verdict:
    cases_list = _benchmark_cases(report)
    if cases_list is None:
        return Verdict(CRASHED, "benchmark report is not in a known format")
    died = _worker_died(report)
    if died is not None:
        return died
    cases = Cases()
    calls: dict[str, int] = {op: 0 for op in operators}
    per_op: dict[str, list[float]] = {op: [] for op in operators}
    headline_per_op: dict[str, list[float]] = {op: [] for op in operators}
    against: set[str] = set()
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
                    if _number(c.get("headline_speedup")) is not None:
                        headline_per_op[op].append(float(c["headline_speedup"]))
                        against.add(str(c.get("headline_vs")))
    speedups = {op: g for op in operators if (g := _geomean(per_op[op])) is not None}
    v = Verdict(PASSED, cases=cases, candidate_calls=calls, speedups=speedups, per_case=per_case_rows(cases_list))
    v.speedup = _geomean(list(speedups.values()))
    v.headline_speedups = {op: g for op in operators if (g := _geomean(headline_per_op[op])) is not None}
    v.headline_speedup = _geomean(list(v.headline_speedups.values()))
    v.headline_vs = (against.pop() if len(against) == 1 else "mixed") if against else None
    if first_fail is not None:
        return _failed_at(
            v,
            str(first_fail.get("case_id") or first_fail.get("nodeid") or ""),
            first_line(first_fail.get("error")),
            str(first_fail.get("error")),
            _shown_case(first_fail),
        )
    if not cases_list:
        v.status = FAILED
        v.message = "the benchmark timed no case: " + (first_failure_line(log_tail) or "empty report")
        return v
    for op in operators:
        if calls[op] == 0:
            v.status = UNCALLED
            v.message = f"no benchmark case timed the candidate for {op} (candidate_source is not 'override')"
            return v
    if rc != _OK:
        v.status = FAILED
        v.message = "pytest exited 1: " + first_failure_line(log_tail)
        return v
    if report.get("interpreted"):
        v.message = str(report.get("caveat") or "CPU interpreter timings: compare ratios only")
    return v
