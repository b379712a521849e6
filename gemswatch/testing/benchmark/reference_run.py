"""The ``--reference-only`` traversal: each selected case's torch baseline once.

Proves the baseline itself runs on this platform; every case gets a record
(``PASSED``, ``SKIP``, ``FAILED`` with its category, or ``NOT_RUN`` when an
earlier fatal failure stopped the traversal). Imports pytest and the
harness's modules; never the plugin or ``gemswatch.watch``.
"""

from __future__ import annotations

import math

import pytest

from .base import Benchmark
from .cases import CaseSpec
from .reference import describe_error, reference_failure
from .state import BenchState
from .timing import single_call_ms, synchronize

__all__ = ["run_reference"]


def run_reference(st: BenchState, bm: Benchmark, selected: list[CaseSpec], nodeid: str) -> None:
    """Run the baseline of each selected case once, recording a status per case."""
    records = []
    for spec in selected:
        record = spec.to_dict() | {
            "nodeid": nodeid, "operator": bm.op, "status": "NOT_RUN",
            "reason": "not reached: an earlier case of this benchmark stopped the traversal",
        }
        records.append(record)
        st.add_reference_record(record)
    for spec, record in zip(selected, records):
        stage = "build_inputs"
        try:
            args, kwargs = bm.inputs(spec, st.device)
            stage = "benchmark_reference"
            latency = single_call_ms(lambda: bm.baseline(*args, **kwargs), st.device)
            if not math.isfinite(latency) or latency < 0:
                raise ValueError(f"invalid reference latency {latency!r} ms")
            stage = "synchronize"
            synchronize(st.device)
        except pytest.skip.Exception as e:
            record.update(status="SKIP", reason=str(e.msg))
            st.mark_reference_skipped(spec.case_id)
            raise
        except BaseException as e:
            failure = reference_failure(e, stage)
            record.update(status="FAILED", reason=describe_error(e), failure=failure)
            fatal = not isinstance(e, Exception) or stage == "synchronize" or failure["category"] == "UNKNOWN"
            if fatal:
                raise
            try:
                synchronize(st.device)
            except Exception as again:
                record["recovery_failure"] = reference_failure(again, "synchronize")
                raise
            continue
        record.update(status="PASSED", reason=None, latency_ms=latency)
        st.mark_executed(spec.case_id)
    failed = sum(r["status"] == "FAILED" for r in records)
    if failed:
        pytest.fail(f"{failed} reference cases failed", pytrace=False)
