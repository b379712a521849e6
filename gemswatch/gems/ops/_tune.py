"""Time kernel launches for tuning choices, on a CUDA GPU.

Triton's own autotuner times configs with events around each call while the
host launches them; a kernel of a few microseconds then measures mostly the
host's launch overhead (tens of microseconds for a Triton launch), and the
choice among configs is noise. Here a spin is queued on the GPU first, so
every launch is issued ahead of the device; a buffer larger than L2 is
overwritten before each call, so inputs come from memory as in a model step;
and events around each call alone give its time.

``bench`` plugs into ``triton.autotune(do_bench=...)``; ``fastest`` picks
among arbitrary calls (a split-K product launches two kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import torch

__all__ = ["bench", "fastest"]

_FLUSH_BYTES = 256 << 20
_REPS = 15
# Spin cycles queued per repetition: at ~2 GHz about 100 us, more than one
# call's host time (two Triton launches and a memset); after the spin the
# flushes keep the device behind the host.
_SPIN_CYCLES_PER_REP = 200_000


def _l2_flusher() -> Callable[[], object]:
    return torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda").zero_


def _times_ms(call: Callable[[], object]) -> list[float]:
    """Sorted per-call times, each call after an L2 flush."""
    call()  # compiles (and tunes) on first use
    flush = _l2_flusher()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(_REPS)]
    torch.cuda._sleep(_SPIN_CYCLES_PER_REP * _REPS)
    for start, end in events:
        flush()
        start.record()
        call()
        end.record()
    events[-1][1].synchronize()
    return sorted(start.elapsed_time(end) for start, end in events)


def bench(call: Callable[[], object], quantiles: Sequence[float] = (0.5,)) -> list[float]:
    """The given quantiles of ``call``'s time in ms (the autotuner's hook)."""
    times = _times_ms(call)
    return [times[round(q * (len(times) - 1))] for q in quantiles]


# Triton's errors for a config the device cannot run (too much shared memory,
# too many registers); the autotuner skips the same ones.
_UNRUNNABLE = {"OutOfResources", "PTXASError", "CompileTimeAssertionFailure"}


def _unrunnable(e: Exception) -> bool:
    return type(e).__name__ in _UNRUNNABLE or "out of resource" in str(e).lower()


def fastest(candidates: Mapping[Hashable, Callable[[], object]], restore: torch.Tensor | None = None) -> Hashable:
    """The key of the quickest call in ``candidates`` (by median). A
    candidate the device cannot run (shared memory, registers) is skipped. ``restore``: a tensor the calls overwrite in place and also read
    (an in-place op's input); it is put back after each candidate."""
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
