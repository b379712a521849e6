"""The candidates table: one row per file, its stage cells and its speedup,
laid out for a width by :func:`~.columns.plan_columns`. Pure."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from ..events import format_speedup, headline
from .columns import ColumnPlan, plan_columns
from .state import Cell, DashboardState, Row

__all__ = ["STATUS_STYLE", "candidates_table", "pack", "status_text", "change_text"]

STATUS_STYLE = {
    "queued": "blue",
    "running": "bold cyan",
    "passed": "bold green",
    "failed": "bold red",
    "all_skipped": "yellow",
    "uncalled": "bold yellow",
    "error": "bold red",
    "crashed": "bold magenta",
    "timeout": "bold yellow",
    "superseded": "dim",
    "not_run": "dim",
}


_NOT_RUN_BECAUSE = " not run: "  # "benchmark not run: correctness failed" (the scheduler's words)


def status_text(status: str) -> Text:
    return Text(status or "-", style=STATUS_STYLE.get(status, ""))


def pack(bits: list[str], width: int, sep: str = " · ") -> list[str]:
    """``bits`` joined by ``sep`` into lines of at most ``width``, breaking
    only between bits; a bit that starts with "(" is a remark on the one
    before it and joins it with a space. A bit wider than a line gets lines
    of its own, broken at its spaces."""
    lines: list[str] = []
    alone = False  # the last line holds a piece of a broken bit
    for bit in bits:
        joiner = " " if bit.startswith("(") else sep
        if lines and not alone and len(lines[-1]) + len(joiner) + len(bit) <= width:
            lines[-1] += joiner + bit
            continue
        alone = len(bit) > width
        if not alone:
            lines.append(bit)
            continue
        line = ""
        for word in bit.split(" "):
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return lines


def _cell(cell: Cell | None, now: float, width: int) -> Text:
    if cell is None or not cell.status:
        return Text("-", style="dim")
    t = status_text(cell.status)
    c = cell.cases
    bits: list[str] = []
    if cell.status == "running" and cell.started is not None:
        bits.append(f"{max(0.0, now - cell.started):.1f}s")
    elif c.get("total"):
        part = f"{c.get('passed', 0)}/{c.get('total', 0)}"
        if c.get("failed"):
            part += f" {c['failed']}✗"
        bits.append(part)
        if c.get("skipped"):
            bits.append(f"({c['skipped']} skipped)")
    if cell.calls:
        bits.append(f"{cell.calls} calls")
    if cell.duration is not None and cell.status not in ("running", "queued", "not_run"):
        bits.append(f"{cell.duration:.1f}s")
    if cell.seed is not None:
        bits.append(f"seed {cell.seed}")
    if cell.status == "not_run" and _NOT_RUN_BECAUSE in cell.message:
        bits.append(cell.message.split(_NOT_RUN_BECAUSE, 1)[1])  # why: the stage that gated it
    if bits:
        t.append("\n" + "\n".join(pack(bits, width)), style="dim")
    return t


def change_text(now: float, before: float) -> Text:
    change = (now / before - 1) * 100
    style = "green" if change > 0.5 else "red" if change < -0.5 else "dim"
    return Text(f"{change:+.1f}%", style=style)


def _speedup(row: Row, width: int) -> Text:
    if row.speedup is None:
        return Text("-", style="dim")
    if row.speedup_sha and row.sha and row.speedup_sha != row.sha:
        # measured on earlier bytes: shown, but not as this file's result
        lines = pack([format_speedup(row.speedup), f"earlier {row.speedup_sha[:8]}"], width)
        return Text("\n".join(lines), style="dim")
    t = Text(format_speedup(row.speedup), style="bold")
    if row.speedup_vs != "eager":  # the baseline the ratio is against: "best" of eager and compile, "gems" (CPU)
        t.append(f" vs {row.speedup_vs}" if len(format_speedup(row.speedup)) + 4 + len(row.speedup_vs) <= width
                 else f"\nvs {row.speedup_vs}", style="dim")
    if row.speedup_prev:
        t.append("\n")
        t.append_text(change_text(row.speedup, row.speedup_prev))
    # the cases come worst first by the same headline ratio
    worst = headline(row.per_case[0])[0] if row.per_case else None
    if isinstance(worst, (int, float)) and len(row.per_case) > 1:
        t.append("\n" + "\n".join(pack([f"worst {format_speedup(worst)}"], width)), style="red" if worst < 1 else "dim")
    return t


def _cells(state: DashboardState, rel: str, row: Row, plan: list[ColumnPlan], selected: str | None) -> list[Text]:
    out = []
    for col in plan:
        if col.key == "mark":
            out.append(Text(">" if rel == selected else " ", style="bold"))
        elif col.key == "candidate":
            shown = rel[len(state.watch) :] if state.watch and rel.startswith(state.watch) else rel
            name = Text(shown, style="bold" if rel == selected else "")
            if row.sha:
                name.append(f"\n{row.sha[:8]}", style="dim")
            out.append(name)
        elif col.key == "operators":
            out.append(Text(", ".join(row.operators)))
        elif col.key == "speedup":
            out.append(_speedup(row, col.width))
        elif col.key == "last":
            last = Text(row.last_time or "-", style="dim" if not row.last_time else "")
            if row.stale:
                last.append("\nstale", style="yellow")
            out.append(last)
        else:
            out.append(_cell(row.cells.get(col.key), state.now, col.width))
    return out


def candidates_table(state: DashboardState, width: int) -> Table:
    """The table of every row at ``width`` characters."""
    plan = plan_columns(width)
    table = Table(box=box.SIMPLE_HEAVY, expand=False, pad_edge=False, collapse_padding=True, show_edge=False)
    for col in plan:
        table.add_column(col.header, width=col.width, min_width=col.width, max_width=col.width,
                         no_wrap=col.key in ("mark", "speedup", "last"), overflow="fold")
    selected = state.selected_candidate()
    for rel, row in state.rows.items():
        table.add_row(*_cells(state, rel, row, plan, selected))
    return table
