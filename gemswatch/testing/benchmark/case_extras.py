"""What a timed case records beyond the candidate against torch eager.

After the runner has timed and checked a case, :func:`record_extras` adds:

- ``latency_compile`` / ``compile_s``: torch.compile of the baseline
  (:mod:`.compiled`), timed in this process after its compile;
- ``latency_gems``: the bundled gems kernel the candidate replaces, timed
  in this process (in a run without a candidate the gems kernel *is* the
  candidate, and its latency is the case's);
- the speedups against each, the headline ratio, GB/s, TFLOP/s and the
  share of the roofline (:mod:`.figures`);
- ``determinism``: the candidate called :data:`~.determinism.RUNS` times on
  the same inputs, judged here (:mod:`.determinism`);
- ``peak_mem_bytes`` / ``peak_mem_base_bytes``: one call's peak device
  memory (:mod:`.memory`). The candidate's is the worker's claim when it
  runs in its worker, accepted only within the bounds the judge sets.

Every figure here is measured by this process's clock and allocator, or is
a worker's claim checked by :func:`~.memory.check_claimed_peak`; none is
taken from the worker as it stands. Each baseline runs on inputs built
afresh from the case's seed (bitwise the case as built), outside any timed
window, and the baselines' own failures leave their figures empty rather
than failing the candidate's case.

Imports torch and the harness's modules; never pytest, the plugin or ``gemswatch.watch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .base import Benchmark
from .cases import CaseSpec, case_seed
from .determinism import RUNS, compare_runs
from .figures import CaseTimes, case_figures
from .memory import check_claimed_peak, device_memory_bytes, fresh_result_bytes, measured_peak
from .reference import describe_error
from .timed_checks import InputPool
from .timing import synchronize, tensor_bytes

if TYPE_CHECKING:
    from ..isolation.judge import RemoteCandidate
    from .state import BenchState

__all__ = ["CASE_FIELDS", "record_extras"]

# The fields this module adds to each case record, in report order.
CASE_FIELDS = (
    "latency_compile", "compile_s", "latency_gems", "speedup_compile", "speedup_best", "speedup_gems",
    "headline_speedup", "headline_vs", "bytes", "flops", "pct_of_roofline", "roofline_bound",
    "determinism", "determinism_detail", "peak_mem_bytes", "peak_mem_base_bytes",
)


def _timed(st: "BenchState", bm: Benchmark, spec: CaseSpec, fn: Callable[..., Any],
           fed: bool) -> float:
    """The session timer's latency of ``fn`` on inputs of its own (refilled
    before each repetition from the case's value pool when ``fed``: the
    candidate's repetitions are, so the baselines' are too)."""
    args, kwargs = bm.inputs(spec, st.device)
    setup = InputPool.of_case(args, kwargs, case_seed(spec.case_id)).feeder(args, kwargs) if fed else None
    # Half the warm-up budget, as the baseline and the candidate each get.
    with st.judge_side():
        return st.timer.measure(lambda: fn(*args, **kwargs), setup, st.timer.warmup_ms / 2).latency


def _compiled_latency(st: "BenchState", bm: Benchmark, spec: CaseSpec, fed: bool) -> tuple[float | None, float | None]:
    sync = lambda: synchronize(st.device)  # noqa: E731
    compiled, took = st.compiled.get(bm.op, bm.baseline, spec, *bm.inputs(spec, st.device), sync)
    if compiled is None:
        return None, None
    try:
        return _timed(st, bm, spec, compiled, fed), took
    except Exception as e:  # noqa: BLE001 - a baseline that fails gives no figure
        st.compiled.status = "unavailable"
        st.compiled.reason = f"the compiled {bm.op} failed when timed: {describe_error(e)}"[:500]
        return None, took


def _gems_latency(st: "BenchState", bm: Benchmark, spec: CaseSpec, is_override: bool,
                  latency: float) -> float | None:
    if not is_override:
        return latency  # the candidate is the gems kernel itself
    gems = st.overrides.original(bm.op) if st.overrides is not None else None
    if gems is None:
        return None
    try:
        return _timed(st, bm, spec, gems, True)
    except Exception as e:  # noqa: BLE001 - the bundled kernel failing is not the candidate's failure
        st.add_note(f"{bm.op}: the bundled gems kernel failed on {spec.case_id}, no gems figure: {describe_error(e)}")
        return None


def _candidate_runs(st: "BenchState", bm: Benchmark, spec: CaseSpec, fn: Callable[..., Any],
                    remote: "RemoteCandidate | None") -> tuple[list[Any], int | None]:
    """The candidate's results of :data:`RUNS` calls on the case as built,
    and the peak memory of the first (the worker's claim, bounded)."""
    results: list[Any] = []
    peak: int | None = None
    # Built up front and all kept alive: the same values in memory of their
    # own, so each call is a new call (not one a pointer-keyed cache answers).
    inputs = [bm.inputs(spec, st.device) for _ in range(RUNS)]
    for i, (args, kwargs) in enumerate(inputs):
        if i == 0 and remote is None:
            out, peak = measured_peak(lambda: fn(*args, **kwargs), st.device)
        else:
            out = fn(*args, **kwargs)
            synchronize(st.device)
        if i == 0 and remote is not None and st.device == "cuda":
            # The worker's figure: at least the fresh results the judge
            # received (the contract puts them in new memory), at most the device.
            peak = check_claimed_peak(bm.op, remote.claimed_peak_bytes, fresh_result_bytes(out, (args, kwargs)),
                                      device_memory_bytes())
        results.append(out)
    return results, peak


def record_extras(st: "BenchState", bm: Benchmark, spec: CaseSpec, entry: dict[str, Any], fn: Callable[..., Any],
                  remote: "RemoteCandidate | None", is_override: bool) -> None:
    """Fill the :data:`CASE_FIELDS` of a timed case's ``entry`` (its
    ``latency`` and ``latency_base`` already measured). Raises what the
    candidate raises in its repeated calls, and IntegrityError for an
    impossible peak memory claim."""
    latency, eager = entry["latency"], entry["latency_base"]
    args, kwargs = bm.inputs(spec, st.device)
    out, entry["peak_mem_base_bytes"] = measured_peak(lambda: bm.baseline(*args, **kwargs), st.device)
    moved = tensor_bytes(args, kwargs) + tensor_bytes(out)
    del args, kwargs, out
    flops = bm.flops(spec) if bm.flops is not None else None
    entry["latency_compile"], entry["compile_s"] = _compiled_latency(st, bm, spec, is_override)
    entry["latency_gems"] = _gems_latency(st, bm, spec, is_override, latency)
    on_gpu = st.device == "cuda"
    entry.update(case_figures(
        CaseTimes(latency, eager, entry["latency_compile"], entry["latency_gems"]),
        interpreted=st.interpreted, moved_bytes=moved, flops=flops,
        copy_gbps=st.copy_gbps if on_gpu else None,
        peak_tflops=st.matmul_tflops(spec.dtype) if on_gpu and flops else None,
    ))
    entry["bytes"], entry["flops"] = moved, flops
    if entry.get("gbps") is not None and st.copy_gbps:
        entry["pct_of_copy"] = 100.0 * entry["gbps"] / st.copy_gbps
    results, entry["peak_mem_bytes"] = _candidate_runs(st, bm, spec, fn, remote)
    entry["determinism"], entry["determinism_detail"] = compare_runs(results)
