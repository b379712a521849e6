"""The per-case table of one benchmark: which shapes are slow, and how slow.

:func:`last_benchmark` finds, in the history records, a candidate's latest
benchmark and the passing one before it; :func:`case_rows` joins the two
into rows worst first, each with its change since the previous save;
:func:`render_case_table` draws them. Columns whose field no row carries
(a report from an older harness) are left out; a row without a field the
table shows gets a blank cell. Pure: no file or clock is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich import box
from rich.table import Table
from rich.text import Text

from .events import format_speedup, headline

__all__ = ["BenchmarkPick", "CaseColumn", "COLUMNS", "candidates_named", "case_rows", "fitted_columns", "format_ms",
           "last_benchmark", "render_case_table", "shown_columns", "with_change"]


@dataclass(frozen=True)
class BenchmarkPick:
    """A candidate's latest benchmark record and the passing one before it."""

    candidate: str
    record: dict[str, Any]
    previous: dict[str, Any] | None = None
    newer_runs: list[dict[str, Any]] = field(default_factory=list)  # later saves that ran no benchmark


def _is_benchmark(rec: dict[str, Any]) -> bool:
    return rec.get("event") == "stage_finished" and rec.get("stage") == "benchmark"


def candidates_named(records: list[dict[str, Any]], target: str) -> list[str]:
    """The candidates a FILE argument names: its path, name or stem, or a
    path ending in it."""
    found: list[str] = []
    for rec in records:
        cand = str(rec.get("candidate", ""))
        if cand in found:
            continue
        if target in (cand, Path(cand).name, Path(cand).stem) or cand.endswith("/" + target.lstrip("./")):
            found.append(cand)
    return found


def last_benchmark(records: list[dict[str, Any]], candidate: str) -> BenchmarkPick | None:
    """The latest benchmark of ``candidate`` in ``records`` (oldest first),
    the passing benchmark before it, and the saves after it that ran none."""
    mine = [r for r in records if r.get("candidate") == candidate]
    benches = [i for i, r in enumerate(mine) if _is_benchmark(r)]
    if not benches:
        return None
    last = benches[-1]
    previous = next(
        (mine[i] for i in reversed(benches[:-1]) if mine[i].get("status") == "passed" and mine[i].get("per_case")),
        None,
    )
    shown_run = mine[last].get("run_id")
    newer = [r for r in mine[last + 1:] if r.get("event") == "run_finished" and r.get("run_id") != shown_run]
    return BenchmarkPick(candidate, mine[last], previous, newer)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ratio_of(row: dict[str, Any]) -> float | None:
    """The ratio a row is judged by (:func:`events.headline`: a case row
    carries the same ``headline_speedup``/``headline_vs`` as its stage)."""
    return headline(row)[0]


def case_rows(pick: BenchmarkPick) -> list[dict[str, Any]]:
    """The shown benchmark's cases worst first (by their headline ratio), each
    with ``prev`` (the case's headline ratio at the previous passing
    benchmark) and ``change`` (now / prev - 1), both None where unknown."""
    before: dict[str, float | None] = {}
    if pick.previous is not None:
        before = {str(c.get("case")): _ratio_of(c) for c in pick.previous.get("per_case") or [] if isinstance(c, dict)}
    rows = [with_change(c, before.get(str(c.get("case")))) for c in pick.record.get("per_case") or [] if isinstance(c, dict)]
    return sorted(rows, key=lambda r: (_ratio_of(r) is None, _ratio_of(r) or 0.0))


def with_change(row: dict[str, Any], prev: float | None) -> dict[str, Any]:
    """``row`` with ``prev`` (its headline ratio at the previous passing
    benchmark) and ``change`` (now / prev - 1; None where either is unknown)."""
    now = _ratio_of(row)
    return {**row, "prev": prev, "change": now / prev - 1 if now is not None and prev else None}


def format_ms(value: Any) -> str:
    """A latency in ms as the table prints it: 12.3 us, 4.56 ms; blank when unknown."""
    v = _num(value)
    if v is None:
        return ""
    return f"{v * 1e3:.1f} us" if v < 1 else f"{v:.2f} ms"


def _ratio_cell(value: Any) -> str:
    v = _num(value)
    return format_speedup(v) if v is not None and v > 0 else ""


def _change_cell(row: dict[str, Any]) -> Text:
    change = _num(row.get("change"))
    if change is None:
        return Text("")
    pct = change * 100
    return Text(f"{pct:+.1f}%", style="green" if pct > 0.5 else "red" if pct < -0.5 else "dim")


def _roofline_cell(row: dict[str, Any]) -> str:
    """The share of the device's limit: % of the roofline (and which roof)
    where the harness measured both roofs, else % of the copy bandwidth."""
    roof, copy = _num(row.get("pct_of_roofline")), _num(row.get("pct_of_copy"))
    if roof is not None:
        bound = row.get("roofline_bound")
        return f"{roof:.0f}%" + (f" {bound}" if bound else "")
    if copy is not None:
        return f"{copy:.0f}% copy"
    return ""


def _fmt(key: str, spec: str) -> Callable[[dict[str, Any]], str]:
    def cell(row: dict[str, Any]) -> str:
        v = _num(row.get(key))
        return "" if v is None else format(v, spec)

    return cell


def _text(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: "" if row.get(key) in (None, "") else str(row.get(key))


@dataclass(frozen=True)
class CaseColumn:
    """One column of the table: its header, the row fields it shows (it is
    left out when no row has any of them) and how a row's cell reads."""

    header: str
    fields: tuple[str, ...]
    cell: Callable[[dict[str, Any]], str | Text]
    always: bool = False  # shown even when no row has the field


def _mib(value: Any) -> str:
    v = _num(value)
    return "" if v is None else f"{v / 1024.0**2:.1f}"


COLUMNS: tuple[CaseColumn, ...] = (
    CaseColumn("case", ("label", "case"), lambda r: Text(str(r.get("label") or r.get("case") or "")), always=True),
    CaseColumn("latency", ("latency_ms",), lambda r: format_ms(r.get("latency_ms")), always=True),
    CaseColumn("eager", ("base_ms",), lambda r: format_ms(r.get("base_ms"))),
    CaseColumn("compile", ("compile_ms",), lambda r: format_ms(r.get("compile_ms"))),
    CaseColumn("gems", ("gems_ms",), lambda r: format_ms(r.get("gems_ms"))),
    CaseColumn("speedup", ("speedup", "headline_speedup"), lambda r: _ratio_cell(_ratio_of(r)), always=True),
    # the other ratios, once the headline is not the eager one
    CaseColumn("vs eager", ("headline_speedup",), lambda r: _ratio_cell(r.get("speedup"))),
    CaseColumn("vs compile", ("speedup_compile",), lambda r: _ratio_cell(r.get("speedup_compile"))),
    CaseColumn("change", ("change",), _change_cell, always=True),
    CaseColumn("roofline", ("pct_of_roofline", "pct_of_copy"), _roofline_cell, always=True),
    CaseColumn("GB/s", ("gbps",), _fmt("gbps", ".3g")),
    CaseColumn("TFLOP/s", ("tflops",), _fmt("tflops", ".3g")),
    CaseColumn("determinism", ("determinism",), _text("determinism")),
    CaseColumn("peak MiB", ("peak_mem_bytes",), lambda r: _mib(r.get("peak_mem_bytes"))),
)


def shown_columns(rows: list[dict[str, Any]]) -> list[CaseColumn]:
    """The columns of ``rows``: the fixed ones and those some row has a value for."""
    return [c for c in COLUMNS if c.always or any(r.get(f) is not None for r in rows for f in c.fields)]


# Which optional columns go first when the table is too wide for its screen.
_DROP_FIRST = ("peak MiB", "determinism", "TFLOP/s", "GB/s", "vs compile", "vs eager", "gems", "compile", "eager")


def _plain(cell: str | Text) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def fitted_columns(rows: list[dict[str, Any]], width: int | None) -> tuple[list[CaseColumn], list[CaseColumn]]:
    """(the columns shown, the columns left out) for ``rows`` at ``width``
    characters: optional columns are left out in :data:`_DROP_FIRST` order
    until the table fits (the case column wraps, so it counts at most 24)."""
    cols = shown_columns(rows)
    dropped: list[CaseColumn] = []

    def needed(cs: list[CaseColumn]) -> int:
        widths = [max([len(c.header)] + [len(_plain(c.cell(r))) for r in rows]) for c in cs]
        if cs and cs[0].header == "case":
            widths[0] = min(widths[0], 24)
        return sum(widths) + 2 * max(0, len(cs) - 1)

    for header in _DROP_FIRST:
        if width is None or needed(cols) <= width:
            break
        gone = [c for c in cols if c.header == header]
        cols = [c for c in cols if c.header != header]
        dropped += gone
    return cols, dropped


def render_case_table(rows: list[dict[str, Any]], title: str = "", width: int | None = None) -> Table:
    """``rows`` (from :func:`case_rows`) as a table, in their order; with
    ``width``, the columns that fit (the caption names those left out)."""
    cols, dropped = fitted_columns(rows, width)
    t = Table(box=box.SIMPLE, pad_edge=False, title=title or None, title_justify="left")
    for c in cols:
        t.add_column(c.header, justify="left" if c.header == "case" else "right", overflow="fold",
                     no_wrap=c.header != "case")
    for r in rows:
        t.add_row(*(c.cell(r) for c in cols))
    if dropped:
        t.caption = "not shown at this width: " + ", ".join(c.header for c in dropped)
    return t
