"""CudaEventTimer against a simulated GPU: no device needed.

The fake models one host clock and two GPU queues (the current stream and
"other streams"): a kernel starts when its stream is free and the host has
launched it, an event records when its stream reaches it, and a device-wide
synchronize returns a fixed wake-up time after every queue has drained.
"""

from __future__ import annotations

import types

import pytest
import torch

from _e2e_helpers import matmuls_on_two_streams

from gemswatch.gems.ops import _timing, _tune
from gemswatch.testing.benchmark import timing

CYCLES_PER_MS = 1_000_000.0
WAKE_MS = 0.02  # host wake-up after a device-wide synchronize
FLUSH_MS = 0.05


class FakeGpu:
    def __init__(self) -> None:
        self.host = 0.0  # ms
        self.stream = 0.0  # when the current stream has drained
        self.other = 0.0  # when every other stream has drained
        self.order: list[str] = []

    def launch(self, ms: float, other_stream: bool = False) -> None:
        if other_stream:
            self.other = max(self.other, self.host) + ms
        else:
            self.stream = max(self.stream, self.host) + ms

    def call(self, host_ms: float, kernel_ms: float, hidden_ms: float = 0.0, name: str = "") -> None:
        """A function that spends host_ms on the host, then queues its kernels."""
        self.order.append(name)
        self.host += host_ms
        self.launch(kernel_ms)
        if hidden_ms:
            self.launch(hidden_ms, other_stream=True)

    def install(self, monkeypatch, timer: timing.CudaEventTimer) -> None:
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t = None

            def record(self) -> None:
                gpu.stream = self.t = max(gpu.stream, gpu.host)

            def synchronize(self) -> None:
                gpu.host = max(gpu.host, self.t)

            def elapsed_time(self, end: "Event") -> float:
                return end.t - self.t

        def synchronize(device=None) -> None:
            gpu.host = max(gpu.host, gpu.stream, gpu.other) + WAKE_MS

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
        monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: gpu.launch(cycles / CYCLES_PER_MS), raising=False)
        monkeypatch.setattr(_timing, "time", types.SimpleNamespace(perf_counter=lambda: gpu.host / 1e3))
        monkeypatch.setattr(timer, "_flush", lambda: gpu.launch(FLUSH_MS))


@pytest.fixture
def gpu_timer(monkeypatch):
    gpu = FakeGpu()
    timer = timing.CudaEventTimer("cuda", warmup_ms=1.0, iter_ms=5.0)
    gpu.install(monkeypatch, timer)
    return gpu, timer


def test_host_overhead_is_not_charged_to_the_kernel(gpu_timer):
    gpu, timer = gpu_timer
    # 0.2 ms of Python before a 0.01 ms kernel: far longer than the L2 flush,
    # so without the spin the GPU would idle inside the window.
    latency = timer(lambda: gpu.call(host_ms=0.2, kernel_ms=0.01))
    assert latency == pytest.approx(0.01)


def test_work_hidden_on_another_stream_is_added(gpu_timer):
    gpu, timer = gpu_timer
    latency = timer(lambda: gpu.call(host_ms=0.005, kernel_ms=0.001, hidden_ms=0.3))
    assert latency == pytest.approx(0.301, rel=0.05)


def test_pair_alternates_the_two_functions(gpu_timer):
    gpu, timer = gpu_timer
    base, cand = timer.pair(
        lambda: gpu.call(0.01, 0.04, name="base"), lambda: gpu.call(0.01, 0.02, name="cand")
    )
    assert (base, cand) == (pytest.approx(0.04), pytest.approx(0.02))
    # The measured repetitions alternate (the settle checks follow them).
    assert "base cand " * 10 in " ".join(gpu.order) + " "


def test_repetitions_follow_the_budget(gpu_timer):
    gpu, timer = gpu_timer
    calls = []
    timer(lambda: (calls.append(1), gpu.call(0.01, 0.5)))
    # Each round costs about flush + spin + 0.5 ms + wake-up; 1 ms of warmup
    # and 5 ms of measuring make a handful of calls, not hundreds.
    assert timer.min_reps + 3 <= len(calls) <= 30


def test_copy_bandwidth_counts_read_and_write(monkeypatch):
    class Fixed(timing.Timer):
        def __call__(self, fn):
            return 0.5  # ms

    monkeypatch.setattr(torch, "empty", lambda n, dtype=None, device=None: torch.zeros(n, dtype=dtype))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the arithmetic only, on any machine
    assert timing.copy_bandwidth_gbps(Fixed("cuda", 1, 1), n_bytes=1 << 20) == pytest.approx(2 * (1 << 20) / 0.5e-3 / 1e9)


# -- the kernel tuner's timing (gemswatch.gems.ops._tune) -------------------------


@pytest.fixture
def tune_gpu(monkeypatch):
    gpu = FakeGpu()
    timer = timing.CudaEventTimer("cuda", warmup_ms=1.0, iter_ms=5.0)
    gpu.install(monkeypatch, timer)
    monkeypatch.setattr(_tune, "_timer", lambda: timer)
    return gpu


def test_tuning_times_the_kernel_not_its_launch(tune_gpu):
    # A Triton launch costs far more host time than a small kernel runs.
    assert _tune.bench(lambda: tune_gpu.call(host_ms=0.1, kernel_ms=0.004)) == [pytest.approx(0.004)]


def test_fastest_skips_candidates_that_cannot_compile(tune_gpu):
    class OutOfResources(Exception):
        pass

    def too_big():
        raise OutOfResources("out of resource: shared memory")

    calls = {"slow": lambda: tune_gpu.call(0.02, 0.03), "big": too_big, "quick": lambda: tune_gpu.call(0.02, 0.01)}
    assert _tune.fastest(calls) == "quick"
    with pytest.raises(ValueError):
        _tune.fastest({"quick": calls["quick"], "broken": lambda: int("x")})


def test_fastest_puts_an_in_place_input_back(tune_gpu):
    x = torch.ones(4)

    def accumulate():
        x.add_(1)
        tune_gpu.call(0.01, 0.01)

    _tune.fastest({"a": accumulate, "b": accumulate}, restore=x)
    assert torch.equal(x, torch.ones(4))


# -- on a real GPU ---------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_the_l2_flush_happens():
    # 2 x 16 MiB fit in a data-centre GPU's L2: without the flush the copy
    # is served from cache and is faster.
    x = torch.randn(4 << 20, device="cuda")
    y = torch.empty_like(x)
    hot = timing.CudaEventTimer("cuda", 5, 20, flush_l2=False)(lambda: y.copy_(x))
    cold = timing.CudaEventTimer("cuda", 5, 20)(lambda: y.copy_(x))
    assert cold > hot


@needs_cuda
def test_work_on_a_side_stream_is_timed():
    honest, hidden = matmuls_on_two_streams()
    timer = timing.CudaEventTimer("cuda", 5, 20)
    assert timer(hidden) > 0.8 * timer(honest)
