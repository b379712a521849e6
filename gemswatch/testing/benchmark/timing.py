"""Timers and the input handling that keeps baseline and candidate apart.

On CUDA a case is timed with CUDA events around each call, the L2 cache
flushed and the host's launch overhead hidden before every repetition; we
take the median (:class:`CudaEventTimer`, which lives in
:mod:`gemswatch.gems.ops._timing` because the kernel tuner uses it too, and
is re-exported here). On the CPU (gems kernels run in Triton's interpreter
there) the same budgets run on the wall clock, one clock read per call,
median (:class:`WallClockTimer`). Reports name the timer and the device, so
interpreter times are never mistaken for GPU times.

Both timers take a zero-argument function; callers give the baseline and the
candidate each their own copy of the inputs (:func:`clone_inputs`), made
outside the timed window, so an in-place op never sees the other's writes.

Imports torch and the gems timer; never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from gemswatch.gems.ops._timing import CudaEventTimer, Measurement, Prepared, Timer

__all__ = [
    "Timer",
    "CudaEventTimer",
    "Measurement",
    "Prepared",
    "WallClockTimer",
    "make_timer",
    "copy_bandwidth_gbps",
    "synchronize",
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


class WallClockTimer(Timer):
    """The same budgets on the host clock: estimate one call, warm up for
    ``warmup_ms``, then time ``iter_ms`` worth of calls one by one; median.
    No cache flush: on the CPU interpreter host overhead dominates anyway."""

    name = "wall_clock(median)"
    min_reps = 1

    def prepare(self, fn: Callable[[], Any], setup: Callable[[], Any] | None = None,
                warmup_ms: float | None = None) -> Prepared:
        budget = self.warmup_ms if warmup_ms is None else warmup_ms
        clock = time.perf_counter
        before = setup or (lambda: None)
        synchronize(self.device)
        # Estimate with up to 5 calls, stopping early once the warmup budget is spent.
        start, n = clock(), 0
        while n < 5:
            before()
            fn()
            n += 1
            if (clock() - start) * 1e3 >= budget:
                break
        synchronize(self.device)
        estimate_ms = max((clock() - start) * 1e3 / n, 1e-6)
        for _ in range(min(self.max_reps, max(0, int(budget / estimate_ms) - n))):
            before()
            fn()
        return Prepared(round_ms=estimate_ms)

    def _rep(self, fn: Callable[[], Any], spin_cycles: int, setup: Callable[[], Any] | None = None) -> float:
        if setup is not None:
            setup()
        synchronize(self.device)
        t0 = time.perf_counter()
        fn()
        synchronize(self.device)
        return (time.perf_counter() - t0) * 1e3


def copy_bandwidth_gbps(timer: Timer, n_bytes: int = 1 << 30) -> float:
    """GB/s (bytes read plus bytes written) of a device-to-device copy of
    ``n_bytes`` (less on a GPU without room for two such buffers), timed with
    ``timer``: the practical memory ceiling."""
    if torch.cuda.is_available():
        n_bytes = max(64 << 20, min(n_bytes, torch.cuda.mem_get_info()[0] // 8))
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    del src, dst
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # give the two buffers back before the cases run
    return 2 * n_bytes / (ms * 1e-3) / 1e9


def matmul_tflops(timer: Timer, dtype: torch.dtype, size: int = 8192) -> float:
    """TFLOP/s of torch's own square matrix product in ``dtype`` (``size``,
    less on a GPU without room), timed with ``timer``: the practical compute
    ceiling a matrix-product case is compared with."""
    if torch.cuda.is_available():
        while size > 1024 and 3 * size * size * dtype.itemsize > torch.cuda.mem_get_info()[0] // 4:
            size //= 2
    a = torch.randn(size, size, device="cuda").to(dtype)
    b = torch.randn(size, size, device="cuda").to(dtype)
    ms = timer(lambda: torch.mm(a, b))
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 / (ms * 1e-3) / 1e12


def make_timer(device: str, warmup_ms: float, iter_ms: float) -> Timer:
    """CUDA events on CUDA, the wall-clock protocol elsewhere."""
    cls = CudaEventTimer if device == "cuda" else WallClockTimer
    return cls(device, warmup_ms, iter_ms)
