"""Timers and the input handling that keeps baseline and candidate apart.

On CUDA a case is timed with ``triton.testing.do_bench``: it clears the L2
cache before every repetition and we take the median. On the CPU (gems
kernels run in Triton's interpreter there) the same protocol runs on the wall
clock: the same warmup and measuring budgets in milliseconds, one clock read
per call, median. Reports name the timer and the device, so interpreter times
are never mistaken for GPU times.

Both timers take a zero-argument function; callers give the baseline and the
candidate each their own copy of the inputs (:func:`clone_inputs`), made
outside the timed window, so an in-place op never sees the other's writes.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import torch

__all__ = [
    "Timer",
    "DoBenchTimer",
    "WallClockTimer",
    "make_timer",
    "synchronize",
    "device_synchronized",
    "clone_inputs",
    "single_call_ms",
    "tensor_bytes",
]


def synchronize(device: str) -> None:
    """Wait for the device to finish queued work on every stream (a no-op on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_contiguous() or value.is_contiguous(memory_format=torch.channels_last):
            return value.detach().clone(memory_format=torch.preserve_format).requires_grad_(value.requires_grad)
        # A strided view: copy its whole storage and view it the same way, so the
        # copy keeps the strides and offset the case was built with.
        storage = value.untyped_storage()
        copy = torch.empty(0, dtype=value.dtype, device=value.device)
        copy.set_(storage.clone(), value.storage_offset(), value.size(), value.stride())
        return copy.requires_grad_(value.requires_grad)
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def clone_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """An independent copy of a case's inputs (same values, sizes and strides)."""
    return _clone(args), _clone(kwargs)


def tensor_bytes(*values: Any) -> int:
    """Bytes of every tensor found in ``values`` (nested tuples, lists, dicts)."""
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, (tuple, list)):
            total += tensor_bytes(*value)
        elif isinstance(value, dict):
            total += tensor_bytes(*value.values())
    return total


def single_call_ms(fn: Callable[[], Any], device: str) -> float:
    """One synchronised call on the wall clock, in ms (reference-only mode)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


class Timer:
    """Median latency in ms of a zero-argument function."""

    name = "timer"

    def __init__(self, device: str, warmup_ms: float, iter_ms: float) -> None:
        self.device = device
        self.warmup_ms = warmup_ms
        self.iter_ms = iter_ms

    def __call__(self, fn: Callable[[], Any]) -> float:
        raise NotImplementedError


def device_synchronized(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` followed by a device-wide ``torch.cuda.synchronize()``.

    do_bench brackets each call with events on the current stream, which
    miss work the call launched on any other stream. Waiting for the whole
    device inside the timed region makes the end event come after all of
    it (at the price of one host round trip per call, the same for the
    baseline and the candidate).
    """
    sync = torch.cuda.synchronize

    def call() -> None:
        fn()
        sync()

    return call


class DoBenchTimer(Timer):
    """``triton.testing.do_bench``: L2 flushed before each repetition, median.

    Each timed call ends with a device-wide synchronize, so work left on any
    stream is inside the window. The synchronize itself costs a host round
    trip; it is measured once (an empty call, same protocol) and subtracted,
    so small kernels are not diluted toward a speedup of 1.
    """

    name = "triton.testing.do_bench(median, l2_flush, device_sync, sync_cost_subtracted)"

    def __init__(self, device: str, warmup_ms: float, iter_ms: float) -> None:
        super().__init__(device, warmup_ms, iter_ms)
        self._sync_cost_ms: float | None = None

    def _bench(self, fn: Callable[[], Any]) -> float:
        import triton.testing

        timed = device_synchronized(fn)
        return float(triton.testing.do_bench(timed, warmup=self.warmup_ms, rep=self.iter_ms, return_mode="median"))

    @property
    def sync_cost_ms(self) -> float:
        if self._sync_cost_ms is None:
            self._sync_cost_ms = self._bench(lambda: None)
        return self._sync_cost_ms

    def __call__(self, fn: Callable[[], Any]) -> float:
        cost = self.sync_cost_ms  # measured before the first case, on an idle device
        return max(self._bench(fn) - cost, 0.0)


class WallClockTimer(Timer):
    """The do_bench protocol on the host clock: estimate one call, warm up for
    ``warmup_ms``, then time ``iter_ms`` worth of calls one by one; median.
    No cache flush: on the CPU interpreter host overhead dominates anyway."""

    name = "wall_clock(median)"
    max_calls = 1000  # bounds a run of a very fast op

    def __call__(self, fn: Callable[[], Any]) -> float:
        clock = time.perf_counter
        synchronize(self.device)
        # Estimate with up to 5 calls, stopping early once the warmup budget is spent.
        start, n = clock(), 0
        while n < 5:
            fn()
            n += 1
            if (clock() - start) * 1e3 >= self.warmup_ms:
                break
        synchronize(self.device)
        estimate_ms = max((clock() - start) * 1e3 / n, 1e-6)
        for _ in range(min(self.max_calls, max(0, int(self.warmup_ms / estimate_ms) - n))):
            fn()
        reps = min(self.max_calls, max(1, int(self.iter_ms / estimate_ms)))
        times = []
        for _ in range(reps):
            synchronize(self.device)
            t0 = clock()
            fn()
            synchronize(self.device)
            times.append((clock() - t0) * 1e3)
        latency = statistics.median(times)
        if not math.isfinite(latency) or latency < 0:
            raise ValueError(f"invalid latency {latency!r} ms")
        return latency


def make_timer(device: str, warmup_ms: float, iter_ms: float) -> Timer:
    """do_bench on CUDA, the wall-clock protocol elsewhere."""
    cls = DoBenchTimer if device == "cuda" else WallClockTimer
    return cls(device, warmup_ms, iter_ms)
