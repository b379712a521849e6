"""A benchmark session's shared state: what the plugin and its runners see.

Owns :class:`BenchState`: the session's options, overrides, device and
timer, and everything the runs record (planned cases, executed ids, records,
results, notes). The plugin creates one per session and reads it to apply
the session rules and write the report; each ``bench`` runner records into
it through its methods only, so every write to the state is one of them.

Imports pytest, torch (through :mod:`.timing`) and ``gemswatch.gems``;
never the plugin, the runner or ``gemswatch.watch``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from ..isolation.judge import WorkerSource
from ..isolation.scheduling import check_scheduling
from ..isolation.stillness import held_still
from ..session_overrides import SessionOverrides
from .cases import CaseList, CaseSpec
from .compiled import CompiledBaselines
from .options import BenchOptions
from .timing import Timer, copy_bandwidth_gbps, make_timer, matmul_tflops

__all__ = ["BenchState"]


@dataclass(eq=False)
class BenchState:
    """The session's settings (read-only) and its records (written by the methods below)."""

    config: pytest.Config
    options: BenchOptions
    overrides: SessionOverrides | None
    available: dict[str, CaseSpec] = field(default_factory=dict)  # every planned case, by id
    executed: set[str] = field(default_factory=set)
    reference_skipped: set[str] = field(default_factory=set)
    preflight_records: list[dict[str, Any]] = field(default_factory=list)
    reference_records: list[dict[str, Any]] = field(default_factory=list)
    case_lists: list[CaseList] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    query_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    node_ops: dict[str, list[str]] = field(default_factory=dict)  # operators each test benchmarked
    reached_candidate: bool = False  # a benchmark got as far as running a candidate
    others_held: int = 0  # the most processes besides the worker held still at once (judge_side)
    _timer: Timer | None = None
    _copy_gbps: float | None = None
    _matmul_tflops: dict[Any, float] = field(default_factory=dict)
    _compiled: CompiledBaselines | None = None

    # -- device -------------------------------------------------------------

    @property
    def device(self) -> str:
        from gemswatch import gems

        return gems.device

    @property
    def interpreted(self) -> bool:
        from gemswatch import gems

        return bool(gems.interpreted)

    @property
    def backend(self) -> str:
        """The vendor name passed to the profile hook."""
        if self.device != "cuda":
            return "cpu"
        import torch

        return "amd" if getattr(torch.version, "hip", None) else "nvidia"

    @property
    def timer(self) -> Timer:
        if self._timer is None:
            self._timer = make_timer(self.device, self.options.warmup_ms, self.options.iter_ms)
        return self._timer

    def judge_side(self) -> AbstractContextManager:
        """A scope for this process timing or measuring on its own: the
        candidate's processes held still, in a session that has a worker
        (:mod:`..isolation.stillness`)."""
        o = self.overrides
        if o is None or o.worker is None:
            return nullcontext()
        return self._held(o.worker, o.adopted)

    @contextmanager
    def _held(self, worker: WorkerSource, everything_below: bool) -> Iterator[None]:
        with held_still(worker.pid, everything_below) as held:
            check_scheduling(worker.judge_scheduling)  # while nothing of the candidate's can change it again
            yield
        others = len(held) - (worker.pid in held)
        if others and not self.others_held:
            self.add_note(f"the candidate's worker had started {others} other process(es); they were held still, "
                          "with it, whenever the judge timed a baseline or measured the device")
        self.others_held = max(self.others_held, others)

    @property
    def copy_gbps(self) -> float | None:
        """Device-to-device copy bandwidth (GB/s, read + write) measured once
        in this session with the session's timer: the ceiling memory-bound
        cases are compared with. None off CUDA."""
        if self._copy_gbps is None and self.device == "cuda":
            with self.judge_side():
                self._copy_gbps = copy_bandwidth_gbps(self.timer)
        return self._copy_gbps

    def matmul_tflops(self, dtype: Any) -> float | None:
        """TFLOP/s of torch's matrix product in ``dtype``, measured once per
        dtype in this session: the ceiling compute-bound cases are compared
        with. None off CUDA."""
        if self.device != "cuda":
            return None
        if dtype not in self._matmul_tflops:
            with self.judge_side():
                self._matmul_tflops[dtype] = matmul_tflops(self.timer, dtype)
        return self._matmul_tflops[dtype]

    @property
    def compiled(self) -> CompiledBaselines:
        """The session's torch.compile baselines (compiled on first use, cached)."""
        if self._compiled is None:
            self._compiled = CompiledBaselines.for_session(self.options.torch_compile, self.device)
        return self._compiled

    @property
    def measured_matmul_tflops(self) -> dict[str, float]:
        """dtype name -> the matrix-product TFLOP/s cases measured (never measures)."""
        return {str(dtype).removeprefix("torch."): v for dtype, v in self._matmul_tflops.items()}

    @property
    def measured_copy_gbps(self) -> float | None:
        """The copy bandwidth if a case measured it, else None (never measures:
        a report of a run without bandwidth figures must not start a copy)."""
        return self._copy_gbps

    # -- recording ------------------------------------------------------------

    def add_benchmark(self, nodeid: str, op: str) -> None:
        self.node_ops.setdefault(nodeid, []).append(op)

    def add_planned(self, spec: CaseSpec) -> None:
        self.available[spec.case_id] = spec

    def mark_executed(self, case_id: str) -> None:
        self.executed.add(case_id)

    def mark_reference_skipped(self, case_id: str) -> None:
        self.reference_skipped.add(case_id)

    def mark_candidate_reached(self) -> None:
        self.reached_candidate = True

    def add_preflight_record(self, record: dict[str, Any]) -> None:
        """Store ``record``; the runner fills it in as the case proceeds."""
        self.preflight_records.append(record)

    def add_reference_record(self, record: dict[str, Any]) -> None:
        """Store ``record``; the runner fills it in as the case proceeds."""
        self.reference_records.append(record)

    def add_case_list(self, case_list: CaseList) -> None:
        self.case_lists.append(case_list)

    def add_result(self, result: dict[str, Any]) -> None:
        self.results.append(result)

    def add_query_line(self, line: str) -> None:
        self.query_lines.append(line)

    def add_note(self, note: str) -> None:
        self.notes.append(note)
