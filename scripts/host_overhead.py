"""Measure the host time per call of every gems op on the benchmark's core cases.

    python scripts/host_overhead.py                 # (b) anywhere; (a) too on a GPU
    python scripts/host_overhead.py --part b --profile 30
    python scripts/host_overhead.py --part a --ops mm,addmm --dtypes bfloat16

Two figures, per op and case:

(a) ``wall``: on a CUDA GPU only. N calls back to back with one
    ``torch.cuda.synchronize()`` after the last, divided by N, for gems and
    for torch eager, on *tiny* variants of the cases (every size capped, see
    ``tiny_shape``) where the kernel takes a few microseconds, so the figure
    is the host time a user's eager loop pays per call.
(b) ``ours``: anywhere (Triton's CPU interpreter included). Every
    ``kernel[grid](...)`` is replaced by a no-op at Triton's boundary
    (``KernelInterface.__getitem__``: JIT, interpreted, autotuned and
    heuristic kernels all launch through it), so the figure is the time our
    Python spends up to the launch: argument checks, launch plans,
    ``torch.empty``, stride logic. Triton's own launcher is not in it.

Each prints per case the median and p90 of the per-call times (us), and per
op the median of the case medians and the p90 over all the op's calls; (b)
adds the floor (the least mean of 10 consecutive calls, steady where other
work shares the cores) and the function calls one op call makes (Python and
builtin, counted with ``sys.setprofile``: the same on any machine).
(a) also issues again, alone, the launches one gems call made (recorded at
Triton's boundary): Triton's launcher and the driver. With both parts, a
last table splits gems' wall time into ours, the launches and the rest. ``--profile N`` runs part (b) under
cProfile and prints the N costliest functions by their own time. Both parts
use the tiny variants unless ``--shapes core`` (on a CPU the allocator maps
a GPU-sized tensor afresh on every ``torch.empty``, a cost the CUDA caching
allocator does not have; and the host path does not depend on the sizes but
for mm's tuned threshold, which the tiny products still reach).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import io
import math
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gemswatch import gems  # noqa: E402  (sets TRITON_INTERPRET before triton loads)
from gemswatch.testing.benchmark import Benchmark  # noqa: E402
from gemswatch.testing.benchmark.cases import CaseSpec, dtype_name  # noqa: E402

BENCHMARK_DIR = ROOT / "benchmark"
# Largest size of any dim in a tiny case, and the most elements of a tensor
# in one. mm keeps 256 per dim: M * N * K = 2^24 is the autotuned path.
TINY_DIM = 256
TINY_NUMEL = 1 << 16
MATRIX_KEYS = ("M", "N", "K")
FLOOR_RUN = 10


@dataclass(frozen=True)
class Sample:
    """The per-call times (us) of one side of one case."""

    op: str
    case: str
    times_us: tuple[float, ...]
    launches_per_call: float = math.nan
    function_calls: float = math.nan  # Python and builtin calls per op call (a noise-free proxy)

    @property
    def median(self) -> float:
        return statistics.median(self.times_us)

    @property
    def p90(self) -> float:
        return quantile(self.times_us, 0.9)

    @property
    def floor(self) -> float:
        """The least mean of FLOOR_RUN consecutive calls: what a call costs
        when nothing else takes the core, steady on a busy machine."""
        runs = [self.times_us[i : i + FLOOR_RUN] for i in range(0, len(self.times_us) - FLOOR_RUN + 1, FLOOR_RUN)]
        return min((statistics.fmean(r) for r in runs), default=self.median)


def quantile(values: tuple[float, ...] | list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load_benchmarks(ops: set[str] | None) -> list[Benchmark]:
    """Every Benchmark declared in benchmark/test_*.py, in file order."""
    found: list[Benchmark] = []
    for path in sorted(BENCHMARK_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_host_overhead_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for value in vars(module).values():
            if isinstance(value, Benchmark) and (ops is None or value.op in ops) and value not in found:
                found.append(value)
    return found


def tiny_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """The case with every size capped: matrix sizes at TINY_DIM, tensor
    shapes at TINY_DIM per dim and TINY_NUMEL in all (largest dim halved
    first), so the dims, broadcasts and reduced axes stay the same."""
    out: dict[str, Any] = {}
    for name, value in shape.items():
        if name in MATRIX_KEYS:
            out[name] = min(int(value), TINY_DIM)
            continue
        dims = [min(int(s), TINY_DIM) for s in value]
        while math.prod(dims) > TINY_NUMEL:
            largest = dims.index(max(dims))
            dims[largest] = max(1, dims[largest] // 2)
        out[name] = dims
    return out


def case_label(case: CaseSpec) -> str:
    shape = ",".join(f"{k}={v}" for k, v in case.shape.items())
    params = ",".join(f"{k}={v}" for k, v in case.params.items())
    return f"{dtype_name(case.dtype)} {shape}" + (f" {params}" if params else "")


def plan(benchmark: Benchmark, dtypes: list[torch.dtype] | None, tiny: bool) -> list[CaseSpec]:
    cases = benchmark.plan(f"host_overhead::{benchmark.op}", "core", dtypes, interpreted=False)
    if not tiny:
        return cases
    return [
        CaseSpec(c.case_id, c.operator, c.nodeid, c.level, c.ordinal, c.dtype, tiny_shape(dict(c.shape)), c.params)
        for c in cases
    ]


class LaunchCounter:
    """Stands in for every Triton launch while active: ``kernel[grid](...)``
    returns at once and only counts."""

    def __init__(self) -> None:
        self.launches = 0

    def _launch(self, *args: Any, **kwargs: Any) -> None:
        self.launches += 1

    @contextlib.contextmanager
    def active(self) -> Iterator[LaunchCounter]:
        from triton.runtime.jit import KernelInterface

        original = KernelInterface.__getitem__
        KernelInterface.__getitem__ = lambda kernel, grid: self._launch
        try:
            yield self
        finally:
            KernelInterface.__getitem__ = original


class LaunchRecorder(LaunchCounter):
    """A LaunchCounter that also keeps each launch (kernel, grid, arguments),
    so they can be issued again bare: Triton's share of a call."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: list[tuple[Any, Any, tuple, dict]] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[LaunchRecorder]:
        from triton.runtime.jit import KernelInterface

        original = KernelInterface.__getitem__

        def record(kernel: Any, grid: Any) -> Callable[..., None]:
            def launch(*args: Any, **kwargs: Any) -> None:
                self.launches += 1
                self.recorded.append((kernel, grid, args, kwargs))

            return launch

        KernelInterface.__getitem__ = record
        try:
            yield self
        finally:
            KernelInterface.__getitem__ = original

    def replay(self) -> None:
        for kernel, grid, args, kwargs in self.recorded:
            kernel[grid](*args, **kwargs)


@contextlib.contextmanager
def throwaway_tuning() -> Iterator[None]:
    """With launches stubbed, mm's tuner would time no-ops and store those
    choices: give it a temporary folder and a constant timer meanwhile, and
    forget its in-memory choices before and after."""
    from gemswatch.gems.ops import _tune
    from gemswatch.gems.ops import mm as mm_module

    def forget() -> None:
        mm_module._tiles.clear()
        mm_module._split_plans.clear()
        mm_module._plans.clear()

    saved = _tune._tuner
    with tempfile.TemporaryDirectory(prefix="host_overhead_tune_") as folder:
        _tune._tuner = _tune.Tuner(Path(folder), timer=lambda call: 1.0)
        forget()
        try:
            yield
        finally:
            _tune._tuner = saved
            forget()


# How gems is called: its own functions (gems.softmax), or torch's through
# the ATen registrations (torch.softmax inside gems.use_gems()).
_via = "gems"


def gems_fn(benchmark: Benchmark) -> Callable[..., Any]:
    return getattr(gems, benchmark.op) if _via == "gems" else benchmark.baseline


def gems_routing() -> contextlib.AbstractContextManager:
    return gems.use_gems() if _via == "aten" else contextlib.nullcontext()


def call_of(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Callable[[], Any]:
    return lambda: fn(*args, **kwargs)


# Part (b)'s clocks: wall time, or the CPU time of this thread, which a
# machine shared with other work does not inflate while we wait for a core.
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
_clock = CLOCKS["wall"]


def time_calls(call: Callable[[], Any], n: int) -> list[float]:
    """Per-call host time (us) of ``n`` calls, one clock read each."""
    clock = _clock
    times = []
    for _ in range(n):
        t0 = clock()
        call()
        times.append((clock() - t0) / 1e3)
    return times


def ours(benchmark: Benchmark, case: CaseSpec, n: int, warmup: int, count: bool = True) -> Sample:
    """Part (b): our Python up to the launch, launches stubbed out."""
    args, kwargs = benchmark.inputs(case, gems.device)
    call = call_of(gems_fn(benchmark), args, kwargs)
    counter = LaunchCounter()
    with gems_routing(), counter.active():
        for _ in range(warmup):  # fills every cache a first call builds
            call()
        before = counter.launches
        times = time_calls(call, n)
        launches = (counter.launches - before) / n
        calls = count_function_calls(call) if count else math.nan  # (it would stop cProfile)
    return Sample(benchmark.op, case_label(case), tuple(times), launches, calls)


def count_function_calls(call: Callable[[], Any], n: int = 3) -> float:
    """Python and builtin function calls made by one ``call()`` (the mean of
    ``n``), through ``sys.setprofile``: unlike a clock, the same on any machine."""
    events = 0

    def hook(frame, event, arg) -> None:
        nonlocal events
        if event in ("call", "c_call"):
            events += 1

    sys.setprofile(hook)
    try:
        for _ in range(n):
            call()
    finally:
        sys.setprofile(None)
    return (events - n) / n  # minus the call of ``call`` itself


def wall(fn: Callable[[], Any], n: int, rounds: int) -> list[float]:
    """Part (a): per-call wall time (us) of ``rounds`` rounds of ``n``
    calls, synchronized only after each round's last call."""
    per_call = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter_ns() - t0) / 1e3 / n)
    return per_call


def wall_pair(benchmark: Benchmark, case: CaseSpec, n: int, rounds: int, warmup: int) -> tuple[Sample, Sample, Sample]:
    """(gems, torch, gems' launches alone) for one case."""
    args, kwargs = benchmark.inputs(case, "cuda")
    gems_call = call_of(gems_fn(benchmark), args, kwargs)
    torch_call = call_of(benchmark.baseline, args, kwargs)
    recorder = LaunchRecorder()
    with gems_routing():
        for _ in range(warmup):  # compiles and tunes outside the clock
            gems_call()
        torch.cuda.synchronize()
        gems_side = wall(gems_call, n, rounds)
        with recorder.active():  # tuned already: the choices are in memory
            gems_call()
    for _ in range(warmup):
        recorder.replay()
        torch_call()
    torch.cuda.synchronize()
    label = case_label(case)
    return (
        Sample(benchmark.op, label, tuple(gems_side)),
        Sample(benchmark.op, label, tuple(wall(torch_call, n, rounds))),
        Sample(benchmark.op, label, tuple(wall(recorder.replay, n, rounds))),
    )


def print_cases(title: str, columns: list[tuple[str, list[Sample]]]) -> None:
    print(f"\n{title}")
    names = "".join(f"{name + ' med':>12}{name + ' p90':>12}" for name, _ in columns)
    print(f"{'op':<12} {'case':<52}{names}")
    for row in zip(*(samples for _, samples in columns)):
        figures = "".join(f"{s.median:12.1f}{s.p90:12.1f}" for s in row)
        first = row[0]
        extra = ""
        if not math.isnan(first.launches_per_call):
            extra = f"  {first.launches_per_call:.0f} launch(es), {first.function_calls:.0f} function calls"
        print(f"{row[0].op:<12} {row[0].case[:52]:<52}{figures}{extra}")


def per_op(samples: list[Sample]) -> dict[str, tuple[float, float, float, float]]:
    """op -> (median of its case medians, p90 of all its calls, median of
    its cases' function calls, median of its cases' floors)."""
    grouped: dict[str, list[Sample]] = {}
    for s in samples:
        grouped.setdefault(s.op, []).append(s)
    return {
        op: (
            statistics.median(s.median for s in group),
            quantile([t for s in group for t in s.times_us], 0.9),
            statistics.median(s.function_calls for s in group),
            statistics.median(s.floor for s in group),
        )
        for op, group in grouped.items()
    }


def print_ops(title: str, columns: list[tuple[str, list[Sample]]]) -> None:
    print(f"\n{title} (us per call: median of case medians, p90 of all calls)")
    summaries = [(name, per_op(samples)) for name, samples in columns]
    counted = not math.isnan(next(iter(summaries[0][1].values()))[2])
    print(f"{'op':<12}" + "".join(f"{name + ' med':>12}{name + ' p90':>12}" for name, _ in summaries)
          + (f"{'floor':>10}{'fn calls':>10}" if counted else ""))  # fmt: skip
    for op in summaries[0][1]:
        figures = "".join(f"{s[op][0]:12.1f}{s[op][1]:12.1f}" for _, s in summaries)
        ours_ = summaries[0][1][op]
        print(f"{op:<12}{figures}" + (f"{ours_[3]:10.1f}{ours_[2]:10.0f}" if counted else ""))
    medians = [statistics.median(v[0] for v in s.values()) for _, s in summaries]
    floors = f"{statistics.median(v[3] for v in summaries[0][1].values()):10.1f}" if counted else ""
    print(f"{'all ops':<12}" + "".join(f"{m:12.1f}{'':>12}" for m in medians) + floors)


def part_b(benchmarks: list[Benchmark], dtypes, tiny: bool, n: int, warmup: int) -> list[Sample]:
    with throwaway_tuning():
        samples = [ours(b, case, n, warmup) for b in benchmarks for case in plan(b, dtypes, tiny)]
    shapes = "tiny variants of the core cases" if tiny else "core cases"
    clock = "thread CPU time" if _clock is CLOCKS["cpu"] else "wall time"
    print_cases(f"(b) our host time up to the launch, launches stubbed ({shapes}, {gems.device}, {clock})",
                [("ours", samples)])  # fmt: skip
    print_ops("(b) per op", [("ours", samples)])
    return samples


def part_a(
    benchmarks: list[Benchmark], dtypes, tiny: bool, n: int, rounds: int, warmup: int
) -> tuple[list[Sample], list[Sample]]:
    """(gems' wall samples, its launches' wall samples)."""
    gems_side, torch_side, launch_side = [], [], []
    for b in benchmarks:
        for case in plan(b, dtypes, tiny):
            g, t, launch = wall_pair(b, case, n, rounds, warmup)
            gems_side.append(g)
            torch_side.append(t)
            launch_side.append(launch)
    shapes = "tiny variants of the core cases" if tiny else "core cases"
    title = f"(a) wall time per call, one sync per {n} calls ({shapes}, {torch.cuda.get_device_name()})"
    columns = [("gems", gems_side), ("torch", torch_side), ("launch", launch_side)]
    print_cases(title, columns)
    print_ops("(a) per op (launch: gems' recorded kernel launches issued again alone)", columns)
    return gems_side, launch_side


def print_split(walls: list[Sample], launches: list[Sample], ours_: list[Sample]) -> None:
    """Per op: gems' wall time, ours (b), the same call's launches issued
    alone (Triton's launcher and the driver), and what is left (torch.empty
    and the other torch calls' device side, the clock's noise)."""
    wall_ops, launch_ops, our_ops = per_op(walls), per_op(launches), per_op(ours_)
    print("\nwhere gems' host time goes (us per call, medians): wall (a) = ours (b) + launches + rest")
    print(f"{'op':<12}{'wall':>10}{'ours':>10}{'launches':>10}{'rest':>10}")
    for op, (wall_median, *_) in wall_ops.items():
        mine, launch = our_ops[op][0], launch_ops[op][0]
        print(f"{op:<12}{wall_median:10.1f}{mine:10.1f}{launch:10.1f}{wall_median - mine - launch:10.1f}")


def profile_b(benchmarks: list[Benchmark], dtypes, tiny: bool, n: int, warmup: int, top: int) -> None:
    profiler = cProfile.Profile()
    with throwaway_tuning():
        profiler.enable()
        for b in benchmarks:
            for case in plan(b, dtypes, tiny):
                ours(b, case, n, warmup, count=False)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n(b) under cProfile, the {top} costliest functions by own time")
    print(out.getvalue())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("a", "b", "both"), default="both",
                   help="(a) needs CUDA and is skipped without it (default: both)")
    p.add_argument("--ops", help="comma-separated op names (default: every benchmarked op)")
    p.add_argument("--dtypes", help="comma-separated dtypes, e.g. bfloat16,float32 (default: the benchmarks')")
    p.add_argument("--shapes", choices=("tiny", "core"), default=None,
                   help="tiny (default): every size capped, see tiny_shape; core: the benchmark's own")
    p.add_argument("--calls", type=int, default=200, help="timed calls per case (b), calls per round (a)")
    p.add_argument("--rounds", type=int, default=20, help="(a) rounds per case")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (compile, tune, fill caches)")
    p.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                   help="(b)'s clock: wall (default) or cpu, this thread's CPU time (steadier on a busy machine)")
    p.add_argument("--via", choices=("gems", "aten"), default="gems",
                   help="call gems.<op> (default), or torch's op inside gems.use_gems() (the dispatcher's path)")
    p.add_argument("--profile", type=int, metavar="N", default=0,
                   help="also run (b) under cProfile and print the N costliest functions")
    return p.parse_args(argv)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    o = parse_args(argv)
    global _clock, _via
    _clock = CLOCKS[o.clock]
    _via = o.via
    ops = set(o.ops.split(",")) if o.ops else None
    dtypes = [getattr(torch, d) for d in o.dtypes.split(",")] if o.dtypes else None
    benchmarks = load_benchmarks(ops)
    if not benchmarks:
        print(f"host_overhead: no benchmark in {BENCHMARK_DIR} for --ops {o.ops}; use op names like mm,softmax")
        return 2
    cuda = gems.device == "cuda"
    ours_samples: list[Sample] = []
    print(f"torch {torch.__version__}, triton {__import__('triton').__version__}, gems on {gems.device}"
          + (" (Triton interpreter)" if gems.interpreted else "")
          + (", called as gems.<op>" if o.via == "gems" else ", called as torch ops inside gems.use_gems()"))  # fmt: skip
    if o.part in ("b", "both"):
        tiny = o.shapes != "core"
        ours_samples = part_b(benchmarks, dtypes, tiny, o.calls, o.warmup)
        if o.profile:
            profile_b(benchmarks, dtypes, tiny, o.calls, o.warmup, o.profile)
    if o.part in ("a", "both"):
        if not cuda:
            print("\n(a) skipped: it needs a CUDA GPU")
        else:
            walls, launches = part_a(benchmarks, dtypes, o.shapes != "core", o.calls, o.rounds, o.warmup)
            if ours_samples:
                print_split(walls, launches, ours_samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
