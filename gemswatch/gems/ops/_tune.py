"""Time kernel launches for tuning choices, on a CUDA GPU.

Triton's own autotuner times configs with events around each call while the
host launches them; a kernel of a few microseconds then measures mostly the
host's launch overhead (tens of microseconds for a Triton launch), and the
choice among configs is noise. Tuning here uses ``CudaEventTimer``
(:mod:`._timing`, the benchmark's timer) instead (spin ahead of the launches,
L2 flushed, events around each call alone), on short budgets: a ranking, not
a report figure.

``bench`` plugs into ``triton.autotune(do_bench=...)``; ``fastest`` picks
among arbitrary calls (a split-K product launches two kernels).

Imports torch and :mod:`._timing`; never the benchmark harness, the
watcher or the test framework.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import torch

from ._timing import CudaEventTimer

__all__ = ["bench", "fastest"]

_WARMUP_MS = 1.0
_ITER_MS = 5.0
# One timer per device: it measures the spin rate and the idle settle figure
# once, and keeps its L2 flush buffer.
_timers: dict[int, CudaEventTimer] = {}
# Triton's errors for a config the device cannot run (too much shared memory,
# too many registers); the autotuner skips the same ones.
_UNRUNNABLE = {"OutOfResources", "PTXASError", "CompileTimeAssertionFailure"}


def _timer() -> CudaEventTimer:
    index = torch.cuda.current_device()
    if index not in _timers:
        _timers[index] = CudaEventTimer("cuda", _WARMUP_MS, _ITER_MS)
    return _timers[index]


def bench(call: Callable[[], object], quantiles: Sequence[float] = (0.5,)) -> list[float]:
    """``call``'s median time in ms, once per requested quantile (the
    autotuner's hook; it ranks configs by the first)."""
    call()  # compiles (and tunes) on first use
    return [_timer()(call)] * len(quantiles)


def _unrunnable(e: Exception) -> bool:
    return type(e).__name__ in _UNRUNNABLE or "out of resource" in str(e).lower()


def fastest(candidates: Mapping[Hashable, Callable[[], object]], restore: torch.Tensor | None = None) -> Hashable:
    """The key of the quickest call in ``candidates`` (by median). A
    candidate the device cannot run (shared memory, registers) is skipped.
    ``restore``: a tensor the calls overwrite in place and also read (an
    in-place op's input); it is put back after each candidate."""
    saved = restore.clone() if restore is not None else None
    times: dict[Hashable, float] = {}
    for key, call in candidates.items():
        try:
            times[key] = bench(call)[0]
        except Exception as e:
            if not _unrunnable(e):
                raise
        finally:
            if saved is not None:
                restore.copy_(saved)
    if not times:
        raise RuntimeError("no launch candidate could run")
    return min(times, key=times.get)
