"""The selected row's benchmark cases, worst speedup first. Pure.

Fields a benchmark adds beyond these (a compile baseline, another roofline)
show as extra columns where the width allows and are named in the caption
where it does not; a field that is not a number or a text, or is empty in
every case, is left out.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from ..events import format_speedup
from .state import Row
from .table import change_text

__all__ = ["PER_CASE_SHOWN", "per_case_table"]

PER_CASE_SHOWN = 8  # rows of the per-shape table in the pane
_KNOWN = {"case", "operator", "label", "latency_ms", "base_ms", "speedup", "pct_of_copy", "tflops", "prev"}
_BASE_WIDTH = 80  # what the known columns take, roughly
_EXTRA_WIDTH = 12


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value * 1e3:.1f} us" if value < 1 else f"{value:.2f} ms"


def _extra_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:.3g}"
    if isinstance(value, str):
        return value if len(value) <= 16 else value[:15] + "…"
    return "-"


def _extras(cases: list[dict[str, Any]]) -> list[str]:
    """Fields beyond the known ones that hold numbers or short texts (in some
    case: one that is always empty is left out), in first-seen order."""
    found: dict[str, None] = {}
    for c in cases:
        for k, v in c.items():
            if k not in _KNOWN and isinstance(v, (int, float, str, bool)):
                found.setdefault(k)
    return list(found)


def _roofline(c: dict[str, Any]) -> str:
    if isinstance(c.get("pct_of_copy"), (int, float)):
        return f"{c['pct_of_copy']:.0f}% copy"
    if isinstance(c.get("tflops"), (int, float)):
        return f"{c['tflops']:.1f} TFLOP/s"
    return "-"


def per_case_table(row: Row, width: int) -> Table:
    """``row``'s benchmark cases at ``width`` characters."""
    cases = row.per_case[:PER_CASE_SHOWN]
    extras = _extras(row.per_case)
    room = max(0, (width - _BASE_WIDTH) // _EXTRA_WIDTH)
    shown, hidden = extras[:room], extras[room:]
    t = Table(box=box.SIMPLE, pad_edge=False, expand=False)
    for name in ("case", "candidate", "baseline", "speedup", "change", "roofline", *shown):
        t.add_column(name, no_wrap=name != "case", overflow="fold", justify="left" if name == "case" else "right")
    for c in cases:
        speedup, prev = c.get("speedup"), c.get("prev")
        t.add_row(
            str(c.get("label") or c.get("case")),
            _ms(c.get("latency_ms")),
            _ms(c.get("base_ms")),
            format_speedup(speedup) if isinstance(speedup, (int, float)) else "-",
            change_text(speedup, prev) if isinstance(speedup, (int, float)) and isinstance(prev, (int, float)) and prev else "-",
            _roofline(c),
            *[_extra_text(c.get(k)) for k in shown],
        )
    notes = []
    more = len(row.per_case) - PER_CASE_SHOWN
    if more > 0:
        notes.append(f"and {more} more case(s) in the benchmark report")
    if hidden:
        notes.append(f"more fields in the report: {', '.join(hidden)}")
    if notes:
        t.caption = " · ".join(notes)
    return t
