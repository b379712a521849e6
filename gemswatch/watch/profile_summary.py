"""Three lines about one profiled case: which kernels, how long, how fast.

:func:`summary_lines` reads what the capture provider wrote
(``profile.json``, ``gemswatch.profile/v1``), or the kernels of an ncu
report (:func:`ncu_kernels`, from ``ncu --import --csv --page raw``), and
the bytes one call of the case moves (from its benchmark), and says:

    kernels: _softmax_kernel (Triton, interpreted)
    time: 21.7 ms in 1 kernel launch(es) over 1 captured call(s)
    bandwidth: 0.02 GB/s (3.9 KB a call, from the benchmark's bytes)

Pure: the files are read by the caller.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

__all__ = ["Kernel", "kernels_of_report", "ncu_kernels", "summary_lines"]

_KIND_WORDS = {"gpu": "GPU", "interpreted": "Triton, interpreted", "torch ops": "torch operators, self CPU time",
               "ncu": "ncu"}
NAMES_SHOWN = 3


@dataclass(frozen=True)
class Kernel:
    """One kernel (or operator) of a capture: its launches, time and the
    DRAM bytes it moved when the profiler measured them."""

    name: str
    calls: int
    time_us: float
    dram_bytes: float | None = None


def kernels_of_report(report: dict[str, Any]) -> list[Kernel]:
    """The kernels a ``profile.json`` lists, most time first."""
    out = []
    for k in report.get("kernels") or []:
        if isinstance(k, dict) and isinstance(k.get("time_us"), (int, float)):
            out.append(Kernel(str(k.get("name")), int(k.get("calls") or 1), float(k["time_us"])))
    return sorted(out, key=lambda k: -k.time_us)


_TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
_BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
               "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3}


def _value(text: str, unit: str, units: dict[str, float]) -> float | None:
    scale = units.get(unit.strip().lower())
    try:
        return float(text.replace(",", "")) * scale if scale is not None else None
    except ValueError:
        return None


def ncu_kernels(csv_text: str) -> list[Kernel]:
    """Kernels of ``ncu --import R --csv --page raw`` output: a header row,
    a units row, then one row per launch (``Kernel Name``,
    ``gpu__time_duration.sum``, ``dram__bytes_read.sum``,
    ``dram__bytes_write.sum``); launches of one name are added up."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None or start + 1 >= len(rows):
        return []
    head, units = rows[start], rows[start + 1]
    col = {name: i for i, name in enumerate(head)}
    name_i, time_i = col.get("Kernel Name"), col.get("gpu__time_duration.sum")
    if name_i is None or time_i is None:
        return []
    totals: dict[str, list[float | None]] = {}
    for r in rows[start + 2:]:
        if len(r) != len(head):
            continue
        t = _value(r[time_i], units[time_i], _TIME_UNITS)
        if t is None:
            continue
        moved: float | None = 0.0
        for metric in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            i = col.get(metric)
            b = _value(r[i], units[i], _BYTE_UNITS) if i is not None else None
            moved = None if b is None or moved is None else moved + b
        tot = totals.setdefault(r[name_i], [0, 0.0, 0.0])
        tot[0] += 1
        tot[1] += t
        tot[2] = None if moved is None or tot[2] is None else tot[2] + moved
    kernels = [Kernel(n, int(v[0]), float(v[1]), v[2]) for n, v in totals.items()]
    return sorted(kernels, key=lambda k: -k.time_us)


def _time(us: float) -> str:
    return f"{us:.1f} us" if us < 1000 else f"{us / 1e3:.2f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def summary_lines(kernels: list[Kernel], kind: str, calls: int, case_bytes: float | None) -> list[str]:
    """The three lines of a capture: kernel names (most time first), their
    total time, and the achieved bandwidth: the profiler's DRAM bytes where
    it measured them, else ``case_bytes`` (what one call of the case moves,
    from its benchmark) times ``calls``, over the kernels' time."""
    if not kernels:
        return ["kernels: none recorded in the capture window", "time: -", "bandwidth: unknown (no kernel time)"]
    names = ", ".join(k.name for k in kernels[:NAMES_SHOWN])
    if len(kernels) > NAMES_SHOWN:
        names += f" and {len(kernels) - NAMES_SHOWN} more"
    total_us = sum(k.time_us for k in kernels)
    launches = sum(k.calls for k in kernels)
    what = "operator call(s)" if kind == "torch ops" else "kernel launch(es)"
    lines = [f"kernels: {names} ({_KIND_WORDS.get(kind, kind)})",
             f"time: {_time(total_us)} in {launches} {what} over {calls} captured call(s)"]
    measured = [k.dram_bytes for k in kernels]
    seconds = total_us * 1e-6
    if seconds <= 0:
        lines.append("bandwidth: unknown (no kernel time)")
    elif measured and all(b is not None for b in measured):
        moved = sum(b for b in measured if b is not None)
        lines.append(f"bandwidth: {moved / seconds / 1e9:.1f} GB/s achieved ({_bytes(moved)} of DRAM traffic, measured)")
    elif case_bytes:
        moved = case_bytes * calls
        lines.append(f"bandwidth: {moved / seconds / 1e9:.3g} GB/s ({_bytes(case_bytes)} a call, from the benchmark's bytes)")
    else:
        lines.append("bandwidth: unknown (the profiler measured no bytes and the benchmark gave none for this case)")
    if kind == "interpreted":
        lines[1] += " (interpreted: compare ratios only)"
    return lines
