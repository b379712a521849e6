"""What the benchmark checks of the calls it times.

The timed calls are the calls whose speed goes on the leaderboard, so they
are judged too, not only the untimed first call:

- :func:`check_timed_output`: the result of the last timed call matches the
  baseline's result for the same inputs (relative L2 distance over the
  finite entries, at most :data:`TIMED_DISTANCE`: rounding of 16-bit
  outputs is a few thousandths, a candidate that answers differently when
  it is being timed is off by about its own size);
- :func:`check_speed_of_light`: a memory-bound case cannot move its bytes
  faster than the device copies memory (measured in the run), with a
  margin for kernels that read more than they write.

Imports torch (as an argument) and the integrity error; never the plugin
or ``gemswatch.watch``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..integrity import IntegrityError, compare_outputs

__all__ = ["TIMED_DISTANCE", "SPEED_OF_LIGHT_MARGIN", "check_timed_output", "check_speed_of_light"]

TIMED_DISTANCE = 0.02
# Honest kernels reached up to 108 % of the measured copy bandwidth on an
# H200 (pure reads beat a copy's read+write mix); 150 % is impossible.
SPEED_OF_LIGHT_MARGIN = 1.5


def check_timed_output(torch: ModuleType, op: str, got: Any, want: Any) -> None:
    """IntegrityError('timed-output') unless ``got`` (the last timed call's
    result) matches ``want`` (the baseline's, same inputs)."""
    measured = compare_outputs(torch, got, want)
    if measured is None:
        raise IntegrityError(
            "timed-output",
            f"the timed calls of {op} returned a result of another structure, shape or dtype than the baseline's; "
            "timed calls are checked like the first one",
        )
    diff, norm = measured
    distance = diff / norm if norm else (0.0 if diff == 0 else float("inf"))
    if distance > TIMED_DISTANCE:
        raise IntegrityError(
            "timed-output",
            f"the timed calls of {op} returned results {distance:.3g} away from the baseline's (relative L2 "
            f"distance; at most {TIMED_DISTANCE} allowed): a candidate must be right when it is timed too",
        )


def check_speed_of_light(op: str, latency_ms: float, moved_bytes: int, copy_gbps: float | None) -> None:
    """IntegrityError('speed-of-light') when ``moved_bytes`` in
    ``latency_ms`` beats the device's copy bandwidth by more than the margin."""
    if not copy_gbps or latency_ms <= 0 or moved_bytes <= 0:
        return
    floor_ms = moved_bytes / (copy_gbps * SPEED_OF_LIGHT_MARGIN * 1e9) * 1e3
    if latency_ms < floor_ms:
        raise IntegrityError(
            "speed-of-light",
            f"{op} timed {latency_ms:.4g} ms for {moved_bytes} bytes, below the case's floor of {floor_ms:.4g} ms "
            f"({SPEED_OF_LIGHT_MARGIN:g} x the measured copy bandwidth of {copy_gbps:.0f} GB/s): impossible, rejected",
        )
