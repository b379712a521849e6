"""Time kernel launches for tuning choices, on a CUDA GPU.

Triton's own autotuner times configs with events around each call while the
host launches them; a kernel of a few microseconds then measures mostly the
host's launch overhead (tens of microseconds for a Triton launch), and the
choice among configs is noise. Tuning here uses ``CudaEventTimer``
(:mod:`._timing`, the benchmark's timer) instead (spin ahead of the launches,
L2 flushed, events around each call alone), on short budgets: a ranking, not
a report figure.

``bench`` plugs into ``triton.autotune(do_bench=...)``; ``fastest`` picks
among arbitrary calls (a split-K product launches two kernels). A
:class:`Tuner` remembers each choice on disk (:mod:`._tune_cache`), so the
next process reads it instead of timing the candidates again.

Imports torch, triton's version and :mod:`._timing`; never the benchmark
harness, the watcher or the test framework.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import torch

from ._timing import CudaEventTimer
from ._tune_cache import TuneCache, default_folder, encode

__all__ = ["Benchmarker", "Tuner", "bench", "cuda_median_ms", "fastest", "tuner"]

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


class Benchmarker(Protocol):
    """Times one candidate: its median in ms (lower wins)."""

    def __call__(self, call: Callable[[], object]) -> float: ...


def cuda_median_ms(call: Callable[[], object]) -> float:
    """The CUDA event timer's median of ``call`` (compiled first, untimed)."""
    return bench(call)[0]


def _unrunnable(e: Exception) -> bool:
    return type(e).__name__ in _UNRUNNABLE or "out of resource" in str(e).lower()


def fastest(
    candidates: Mapping[Hashable, Callable[[], object]],
    restore: torch.Tensor | None = None,
    timer: Benchmarker | None = None,
) -> Hashable:
    """The key of the quickest call in ``candidates`` (by median). A
    candidate the device cannot run (shared memory, registers) is skipped.
    ``restore``: a tensor the calls overwrite in place and also read (an
    in-place op's input); it is put back after each candidate. ``timer``:
    what times a candidate (default: the CUDA event timer)."""
    timer = timer or cuda_median_ms
    saved = restore.clone() if restore is not None else None
    times: dict[Hashable, float] = {}
    for key, call in candidates.items():
        try:
            times[key] = timer(call)
        except Exception as e:
            if not _unrunnable(e):
                raise
        finally:
            if saved is not None:
                restore.copy_(saved)
    if not times:
        raise RuntimeError("no launch candidate could run")
    return min(times, key=times.get)


class Tuner:
    """Chooses among launch candidates once per problem, remembering the
    choice on disk per (device name, triton version, kernel).

    Args:
        folder: the cache folder; None: ``$GEMSWATCH_TUNE_CACHE`` or
            ``~/.cache/gemswatch/tune``, read when first needed.
        timer: times one candidate (default: the CUDA event timer).
        triton_version: default: the installed triton's.
    """

    def __init__(
        self, folder: Path | None = None, timer: Benchmarker | None = None, triton_version: str | None = None
    ) -> None:
        self.folder = folder
        self.timer = timer
        self.triton_version = triton_version
        self._caches: dict[str, TuneCache] = {}

    def cache(self, device: str) -> TuneCache:
        if device not in self._caches:
            if self.triton_version is None:
                import triton

                self.triton_version = triton.__version__
            self._caches[device] = TuneCache(self.folder or default_folder(), device, self.triton_version)
        return self._caches[device]

    def choose(
        self,
        kernel: str,
        device: str,
        key: Hashable,
        options: Sequence[Hashable],
        make_call: Callable[[Hashable], Callable[[], object]],
        restore: torch.Tensor | None = None,
    ) -> Hashable:
        """The fastest of ``options`` for problem ``key`` of ``kernel`` on
        the device named ``device``: the stored choice when it is still one
        of ``options``, else timed now (``make_call(option)`` runs one) and
        stored. Keys and options must be JSON values (tuples, ints, str,
        bools, None); the caller memoises the result in memory."""
        cache = self.cache(device)
        encoded_key = encode(key)
        entries = cache.entries(kernel)
        if encoded_key in entries:
            stored = encode(entries[encoded_key])
            for option in options:
                if encode(option) == stored:
                    return option
        choice = fastest({o: make_call(o) for o in options}, restore=restore, timer=self.timer)
        cache.put(kernel, encoded_key, choice)
        return choice


_tuner = Tuner()


def tuner() -> Tuner:
    """The process's tuner (tests swap it for one with a fake timer)."""
    return _tuner
