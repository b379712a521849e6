"""The detail pane's text: what failed and where to look, grouped.

A failure reads top down: the stage and its one-line message; the seed that
replays it; the failed cases by test function and dtype ("test_widths ·
bfloat16: 12 of 20 fail, worst rel err 3.0e-02 at [4, 781]"); the full
detail of the first failure; the coverage of the stage; the end of its log.
Lines are never cut: the screen wraps them to the pane's width and scrolls.
Pure.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

from ..stage.pytest_log import SESSION_NOTE
from .state import Row
from .table import STATUS_STYLE

__all__ = ["PANE_LINES", "failure_lines", "group_line", "coverage_lines", "skip_lines", "pane_lines"]

LOG_LINES = 8  # of the log's end, in a collapsed pane
PANE_LINES = 12  # lines a collapsed pane shows
# pytest's short summary lines, cut to its own terminal's width ("FAILED id - msg...")
_CUT_SUMMARY = re.compile(r"^(FAILED|ERROR) \S+ - .*\.\.\.$")
# The session's own lines (how the worker is sandboxed, where the candidate
# calls spent their time) say nothing of what went wrong: the log keeps them.
_HEADER = SESSION_NOTE


def _err(x: float) -> str:
    return f"{x:.1e}"


def _shape(dims: Any) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]" if isinstance(dims, (list, tuple)) else str(dims)


def group_line(g: dict[str, Any]) -> Text:
    """One failure group: test, dtype, how many of how many, the worst error."""
    t = Text("  ")
    t.append(str(g.get("test") or "?"), style="bold")
    if g.get("dtype"):
        t.append(f" · {g['dtype']}", style="bold")
    failed, of = g.get("failed", 0), g.get("of", 0)
    t.append(f": {failed} of {of} fail" if of else f": {failed} fail", style="red")
    rel = g.get("worst_rel_err")
    if isinstance(rel, (int, float)):
        t.append(f", worst rel err {_err(rel)}")
        if g.get("worst_shape") is not None:
            t.append(f" at {_shape(g['worst_shape'])}")
    else:
        shapes = g.get("shapes") or []
        if shapes:
            t.append(" at " + ", ".join(_shape(s) for s in shapes[:3]))
    return t


def _group_detail(g: dict[str, Any]) -> list[Text]:
    out = []
    cases = [str(c) for c in g.get("cases") or []]
    if cases:
        worst = str(g.get("worst_case") or "")
        shown = [f"{c} (worst, index {_shape(g['worst_index'])})" if c == worst and g.get("worst_index") is not None
                 else c for c in cases]
        more = g.get("failed", 0) - len(cases)
        out.append(Text("    " + ", ".join(shown) + (f" and {more} more" if more > 0 else ""), style="dim"))
    if not isinstance(g.get("worst_rel_err"), (int, float)) and g.get("error"):
        out.append(Text(f"    {g['error']}", style="dim"))
    return out


def coverage_lines(coverage: dict[str, Any]) -> list[Text]:
    """Per operator: cases, size classes, dtypes, layouts (one line each)."""
    out = []
    for op, entry in coverage.items():
        if not isinstance(entry, dict):
            continue
        t = Text(f"covered {op}: ", style="dim")
        bits = [f"{entry.get('cases', 0)} cases"]
        for axis in ("size_class", "dtype", "layout"):
            values = entry.get(axis)
            if isinstance(values, list) and values:
                bits.append(" ".join(str(v) for v in values))
        t.append(" · ".join(bits), style="dim")
        out.append(t)
    return out


def skip_lines(row: Row) -> list[Text]:
    """Why the row's cases were skipped, stage by stage."""
    lines = []
    for stage, cell in row.cells.items():
        if not cell.skips:
            continue
        lines.append(Text(f"{stage}: {cell.cases.get('skipped', sum(cell.skips.values()))} of "
                          f"{cell.cases.get('total', '?')} skipped", style="dim"))
        lines += [Text(f"  {n} x {reason}", style="dim") for reason, n in cell.skips.items()]
    return lines


def failure_lines(row: Row, expanded: bool) -> list[Text]:
    """The failure of ``row`` (``row.failure`` must be set), top down."""
    f = row.failure or {}
    stage, status = str(f.get("stage")), str(f.get("status"))
    lines: list[Text] = []
    groups = [g for g in f.get("failure_groups") or [] if isinstance(g, dict)]
    head = Text(f"{stage} {status}", style=STATUS_STYLE.get(status, ""))
    cases = f.get("cases") or {}
    if groups and isinstance(cases.get("failed"), int) and cases.get("total"):
        # the groups say what failed; the first failure's message follows them
        skipped = f", {cases['skipped']} skipped" if cases.get("skipped") else ""
        head.append(f": {cases['failed']} of {cases['total']} cases failed{skipped}")
    else:
        head.append(f": {f.get('message', '')}")
    lines.append(head)
    if isinstance(f.get("seed"), int):
        lines.append(Text(f"replay: gemswatch run --seed {f['seed']} {row.candidate}", style="dim"))
    if groups:
        lines.append(Text("failed cases by test and dtype:"))
        for g in groups:
            lines.append(group_line(g))
            lines += _group_detail(g)
        failed = cases.get("failed", 0)
        grouped = sum(int(g.get("failed", 0)) for g in groups)
        if isinstance(failed, int) and failed > grouped:
            lines.append(Text(f"  and {failed - grouped} more failed case(s) in the report", style="dim"))
        lines.append(Text(f"first failure: {f.get('message', '')}"))
    elif f.get("first_failure"):
        lines.append(Text(f"first failure: {f['first_failure']}", style="bold"))
    detail = str(f.get("detail") or "")
    if detail and detail.strip() != str(f.get("message", "")).split(": ", 1)[-1].strip():
        shown = detail.splitlines()
        lines += [Text(ln) for ln in (shown if expanded else shown[:8])]
    cell = row.cells.get(stage)
    if cell is not None and cell.coverage:
        lines += coverage_lines(cell.coverage)
    if row.log_tail:
        tail = [ln for ln in row.log_tail.rstrip().splitlines() if not _HEADER.match(ln)]
        if groups:
            tail = [ln for ln in tail if not _CUT_SUMMARY.match(ln)]
        lines += [Text(ln, style="dim") for ln in (tail if expanded else tail[-LOG_LINES:])]
    if f.get("log"):
        lines.append(Text(f"log: {f['log']} (o opens it)", style="dim"))
    return lines


def pane_lines(row: Row, expanded: bool) -> list[Text]:
    """The detail pane's lines for ``row``, before wrapping: its failure,
    else what its correctness stage covered and why cases were skipped."""
    if row.failure:
        return failure_lines(row, expanded)
    cell = row.cells.get("correctness")
    return (coverage_lines(cell.coverage) if cell is not None else []) + skip_lines(row)
