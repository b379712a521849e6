"""The selected row's benchmark cases, worst first, drawn by the same table
as ``gemswatch show`` (:mod:`..case_table`) at the pane's width. Pure."""

from __future__ import annotations

from rich.table import Table

from ..case_table import render_case_table, with_change
from .state import Row

__all__ = ["PER_CASE_SHOWN", "per_case_table"]

PER_CASE_SHOWN = 8  # rows of the per-shape table in the pane


def per_case_table(row: Row, width: int) -> Table:
    """``row``'s benchmark cases (the stage gives them worst first, each with
    its ratio at the previous passing benchmark as ``prev``) at ``width``."""
    rows = [with_change(c, c.get("prev")) for c in row.per_case[:PER_CASE_SHOWN]]
    t = render_case_table(rows, width=width)
    more = len(row.per_case) - PER_CASE_SHOWN
    if more > 0:
        note = f"and {more} more case(s): gemswatch show {row.candidate}"
        t.caption = f"{t.caption} · {note}" if t.caption else note
    return t
