"""The benchmark session's reports, built in memory and written once.

Every JSON report starts with ``schema_version`` and replaces the previous
file atomically (temp file in the same folder, then ``os.replace``): a reader
sees the old report or the new one, never a mix or a merge.

Imports only the harness's pure modules (no torch, pytest, runner or
plugin) and never ``gemswatch.watch``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .._atomic import write_json_atomic, write_text_atomic
from .cases import CASE_LIST_SCHEMA, CaseList
from .reference import REFERENCE_SCHEMA
from .figures import INTERPRETER_CAVEAT
from .summary import extra_geomeans, summarize

__all__ = [
    "BENCHMARK_SCHEMA",
    "PREFLIGHT_SCHEMA",
    "case_list_report",
    "preflight_report",
    "reference_report",
    "benchmark_report",
    "benchmark_log",
    "write_json_atomic",
    "write_text_atomic",
]

BENCHMARK_SCHEMA = "gemswatch.benchmark/v1"
PREFLIGHT_SCHEMA = "flaggems.preflight/v1"


def case_list_report(case_lists: Iterable[CaseList]) -> dict[str, Any]:
    return {"schema_version": CASE_LIST_SCHEMA, "benchmarks": [c.to_dict() for c in case_lists]}


def preflight_report(records: list[dict[str, Any]], status: str, exit_status: int,
                     problems: list[str]) -> dict[str, Any]:
    """``flaggems.preflight/v1``; ``status``, ``exit_status`` and ``problems``
    are gemswatch additions giving the session's verdict."""
    return {"schema_version": PREFLIGHT_SCHEMA, "status": status, "exit_status": exit_status,
            "problems": problems, "records": records}


def reference_report(records: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {"schema_version": REFERENCE_SCHEMA, "phase": "timing", "status": status, "records": records}


def _operators(benchmarks: list[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    by_op: dict[str, list[Mapping[str, Any]]] = {}
    for b in benchmarks:
        by_op.setdefault(b["operator"], []).append(b)
    summary = {}
    for op, entries in by_op.items():
        cases = [c for b in entries for c in b["cases"]]
        good, speedup, source = summarize(cases)
        summary[op] = {
            "geomean_speedup": speedup,
            "cases": len(cases),
            "failed": len(cases) - len(good),
            "candidate_source": source,
            **extra_geomeans(cases),
        }
    return summary


def benchmark_report(benchmarks: list[Mapping[str, Any]], *, device: str, interpreted: bool, level: str,
                     timer: str, warmup_ms: float, iter_ms: float, status: str, exit_status: int,
                     problems: list[str], copy_gbps: float | None = None,
                     torch_compile: Mapping[str, Any] | None = None,
                     matmul_tflops: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The ``gemswatch.benchmark/v1`` report of a timing run (latencies in ms;
    ``copy_gbps`` and ``matmul_tflops``: the device's copy bandwidth and
    matrix-product peak measured in the same run; ``torch_compile``: whether
    the compile baseline ran, and why not)."""
    return {
        "schema_version": BENCHMARK_SCHEMA,
        "device": device,
        "interpreted": interpreted,
        "level": level,
        "timer": timer,
        "warmup_ms": warmup_ms,
        "iter_ms": iter_ms,
        "copy_gbps": copy_gbps,
        "status": status,
        "exit_status": exit_status,
        "problems": problems,
        "benchmarks": list(benchmarks),
        "operators": _operators(list(benchmarks)),
        "headline_vs": "gems" if interpreted else "best",
        "caveat": INTERPRETER_CAVEAT if interpreted else None,
        "torch_compile": dict(torch_compile) if torch_compile is not None else None,
        "matmul_tflops": dict(matmul_tflops or {}),
    }


def _fmt(value: Any, spec: str) -> str:
    if value is None:  # as wide as a number would be, so the columns stay aligned
        width = spec.split(".")[0]
        return "-".rjust(int(width)) if width.isdigit() else "-"
    return format(value, spec)


def benchmark_log(report: Mapping[str, Any]) -> str:
    """A plain-text table of a benchmark report, one line per case."""
    lines = [
        f"# {report['schema_version']} device={report['device']} interpreted={report['interpreted']} "
        f"level={report['level']} timer={report['timer']} copy_gbps={_fmt(report.get('copy_gbps'), '.0f')}",
    ]
    if report.get("caveat"):
        lines.append(f"# {report['caveat']}")
    lines.append(
        f"{'operator':<12} {'dtype':<9} {'base ms':>10} {'gems ms':>10} {'speedup':>8} {'GB/s':>8} {'%copy':>6} "
        f"{'TFLOP/s':>8} {'compile ms':>10} {'bundled ms':>10} {'headline':>9} {'%roof':>6} {'determinism':<17} "
        "shape params [case_id]"
    )
    for b in report["benchmarks"]:
        for c in b["cases"]:
            lines.append(
                f"{b['operator']:<12} {c['dtype']:<9} {_fmt(c['latency_base'], '10.4f')} {_fmt(c['latency'], '10.4f')} "
                f"{_fmt(c['speedup'], '8.3f')} {_fmt(c['gbps'], '8.2f')} "
                f"{_fmt(c.get('pct_of_copy'), '6.1f')} {_fmt(c['tflops'], '8.3f')} "
                f"{_fmt(c.get('latency_compile'), '10.4f')} {_fmt(c.get('latency_gems'), '10.4f')} "
                f"{_fmt(c.get('headline_speedup'), '9.3f')} {_fmt(c.get('pct_of_roofline'), '6.1f')} "
                f"{c.get('determinism') or '-':<17} "
                f"{c['shape']} {c['params']} [{c['case_id']}]" + (f" ERROR {c['error']}" if c["error"] else "")
            )
    for op, s in report["operators"].items():
        lines.append(f"# {op}: geomean speedup {_fmt(s['geomean_speedup'], '.3f')} over {s['cases']} cases"
                     f" (candidate_source={s['candidate_source']}); headline {_fmt(s.get('geomean_headline'), '.3f')}"
                     f" against {s.get('headline_vs') or '-'}")
    return "\n".join(lines) + "\n"
