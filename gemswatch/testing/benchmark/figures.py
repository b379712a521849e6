"""The figures of one timed case, from its latencies, bytes and FLOPs.

Pure arithmetic on numbers the judge measured (or bounded): achieved GB/s
and TFLOP/s, the share of the roofline, and the speedups against each
baseline with the one that heads the report. Which baseline heads it:

- on a GPU, the faster of torch eager and torch.compile for the case
  (``best``; ``eager`` where the compile baseline gave no figure);
- under Triton's CPU interpreter, the bundled gems kernel (``gems``): it is
  interpreted too, so it is the only baseline a ratio against means
  anything (torch's CPU kernels are native code).

Imports only the standard library: never torch, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HEADLINE_WORDS", "INTERPRETER_CAVEAT", "CaseTimes", "case_figures", "headline_of"]

INTERPRETER_CAVEAT = (
    "CPU interpreter: only the ratio against the interpreted gems kernel means anything "
    "(torch eager and torch.compile run native CPU code; GB/s and roofline need a GPU)"
)

# What each headline baseline is, in a sentence's words.
HEADLINE_WORDS = {
    "best": "the best of torch eager and torch.compile",
    "eager": "torch eager (no torch.compile figure)",
    "gems": "the interpreted gems kernel (the only ratio that means anything under the CPU interpreter)",
    "mixed": "the best of torch eager and torch.compile where compiled, else eager",
}


@dataclass(frozen=True)
class CaseTimes:
    """What was measured of one case (ms; None: not measured)."""

    latency: float  # the candidate
    eager: float | None  # torch eager (the report's latency_base)
    compiled: float | None = None  # torch.compile of the baseline
    gems: float | None = None  # the bundled gems kernel


def _ratio(base: float | None, latency: float) -> float | None:
    return base / latency if base is not None and base > 0 and latency > 0 else None


def headline_of(interpreted: bool, compiled: float | None) -> str:
    """The baseline a case's headline ratio is against: gems, best or eager."""
    if interpreted:
        return "gems"
    return "best" if compiled is not None else "eager"


def case_figures(times: CaseTimes, *, interpreted: bool, moved_bytes: int, flops: float | None,
                 copy_gbps: float | None, peak_tflops: float | None) -> dict[str, object]:
    """The report fields of one case that follow from ``times``.

    Args:
        moved_bytes: the case's inputs and output.
        flops: the case's FLOPs, when its benchmark declares them.
        copy_gbps, peak_tflops: the memory and compute roofs measured in the
            run (None off CUDA; then no roofline share is given).
    """
    lat = times.latency
    seconds = lat * 1e-3 if lat > 0 else None
    eager_or_compiled = [t for t in (times.eager, times.compiled) if t is not None and t > 0]
    best = min(eager_or_compiled) if eager_or_compiled else None
    vs = headline_of(interpreted, times.compiled)
    figures: dict[str, object] = {
        "gbps": moved_bytes / seconds / 1e9 if seconds and moved_bytes else None,
        "tflops": flops / seconds / 1e12 if seconds and flops else None,
        "speedup_compile": _ratio(times.compiled, lat),
        "speedup_best": _ratio(best, lat),
        "speedup_gems": _ratio(times.gems, lat),
        "headline_vs": vs,
        "pct_of_roofline": None,
        "roofline_bound": None,
    }
    figures["headline_speedup"] = {"gems": figures["speedup_gems"], "best": figures["speedup_best"],
                                   "eager": _ratio(times.eager, lat)}[vs]
    # The roofline time: the longer of moving the bytes at copy speed and
    # doing the FLOPs at the matrix-product peak.
    memory_ms = moved_bytes / (copy_gbps * 1e9) * 1e3 if copy_gbps and moved_bytes else None
    compute_ms = flops / (peak_tflops * 1e12) * 1e3 if peak_tflops and flops else None
    if seconds and (memory_ms is not None or compute_ms is not None):
        bound, roof_ms = max((("memory", memory_ms or 0.0), ("compute", compute_ms or 0.0)), key=lambda kv: kv[1])
        figures["pct_of_roofline"] = 100.0 * roof_ms / lat
        figures["roofline_bound"] = bound
    return figures
