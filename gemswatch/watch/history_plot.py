"""``gemswatch history OP --svg FILE``: an operator's speedups as a picture.

:func:`plot_data` gathers from the history records the speedup of every
passing benchmark of each candidate of OP, in save order, and the per-case
speedups of the best variant (of those that passed correctness); :func:`render_svg`
draws both as one self-contained SVG (log-scale speedup axes, 1x marked):
one line per candidate, one bar per case. Pure: no file is read or written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from .events import format_speedup
from .history_tables import saves

__all__ = ["Point", "PlotData", "plot_data", "render_svg"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
WIDTH = 1040
_AGAINST = {"eager": "torch eager", "best": "the best of eager and torch.compile", "gems": "the gems kernel"}
BARS_SHOWN = 40  # cases of the best variant drawn (worst first)


@dataclass(frozen=True)
class Point:
    """One passing benchmark of a candidate: its place among the saves plotted."""

    save: int
    time: str
    sha: str
    speedup: float


@dataclass
class PlotData:
    operator: str
    against: str = "eager"  # the baseline the speedups are against: eager, best or gems
    series: dict[str, list[Point]] = field(default_factory=dict)  # candidate -> its points, oldest first
    saves: int = 0
    best: str = ""  # "candidate sha8" of the best variant
    cases: list[tuple[str, float]] = field(default_factory=list)  # the best variant's (case label, speedup), worst first


def _positive(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v) else None


def _mine(c: Any, operator: str) -> bool:
    return isinstance(c, dict) and c.get("operator") in (None, "", operator, operator + "_backward")


def _headline(bench: dict[str, Any], operator: str) -> float | None:
    """The benchmark's headline ratio for ``operator``: the record's own when
    it benchmarked this operator alone, else the geomean of its cases'."""
    if list(bench.get("operators") or []) == [operator]:
        return _positive(bench.get("headline_speedup"))
    values = [v for c in bench.get("per_case") or [] if _mine(c, operator)
              if (v := _positive(c.get("headline_speedup"))) is not None]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def plot_data(records: list[dict[str, Any]], operator: str) -> PlotData:
    """What the picture of ``operator`` shows (records oldest first): the
    headline ratio (against the best of eager and torch.compile, or the
    interpreted gems kernel) where every benchmark plotted has one against
    the same baseline, else the speedup against torch eager."""
    runs = [r for r in saves(records, operator) if operator in r["operators"] and r["speedup"] is not None]
    benches = [r["stages"].get("benchmark") or {} for r in runs]
    against = {b.get("headline_vs") for b in benches}
    headline = bool(runs) and len(against) == 1 and None not in against and all(
        _headline(b, operator) is not None for b in benches)
    data = PlotData(operator, str(next(iter(against))) if headline else "eager")
    passed = {(r["candidate"], r["sha"]) for r in saves(records, operator)
              if (r["stages"].get("correctness") or {}).get("status") == "passed"}
    best: tuple[float, dict[str, Any], dict[str, Any]] | None = None
    for r, b in zip(runs, benches):
        sp = _headline(b, operator) if headline else _positive(r["speedups"].get(operator, r["speedup"]))
        if sp is None:
            continue
        data.saves += 1
        data.series.setdefault(str(r["candidate"]), []).append(Point(data.saves, str(r["time"]), str(r["sha"]), sp))
        if (r["candidate"], r["sha"]) in passed and (best is None or sp > best[0]):
            best = (sp, r, b)
    if best is not None:
        _, run, bench = best
        data.best = f"{run['candidate']} {str(run['sha'])[:8]}"
        key = "headline_speedup" if headline else "speedup"
        rows = [(str(c.get("label") or c.get("case")), v) for c in bench.get("per_case") or []
                if _mine(c, operator) and (v := _positive(c.get(key))) is not None]
        data.cases = sorted(rows, key=lambda lv: lv[1])
    return data


class _LogAxis:
    """Speedup -> pixel on a log scale that always includes 1x."""

    def __init__(self, values: list[float], lo_px: float, hi_px: float):
        lo, hi = min(values + [1.0]), max(values + [1.0])
        self.lo, self.hi = math.log10(lo) - 0.15, math.log10(hi) + 0.15
        self.lo_px, self.hi_px = lo_px, hi_px

    def __call__(self, v: float) -> float:
        f = (math.log10(v) - self.lo) / (self.hi - self.lo)
        return self.lo_px + f * (self.hi_px - self.lo_px)

    def ticks(self) -> list[float]:
        decades = range(math.floor(self.lo), math.ceil(self.hi) + 1)
        steps = (1, 2, 5) if self.hi - self.lo < 3 else (1,)
        return [s * 10.0**d for d in decades for s in steps if self.lo <= math.log10(s * 10.0**d) <= self.hi]


def _tick(v: float) -> str:
    return f"{v:g}x" if v >= 1 else format_speedup(v)


def _text(x: float, y: float, s: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(s)}</text>'


def _series_panel(data: PlotData, top: float) -> tuple[list[str], float]:
    height = 300
    left, right, plot_top, plot_bottom = 70.0, WIDTH - 330.0, top + 40, top + height - 40
    out = [_text(left, top + 22, f"{data.operator}: speedup against {_AGAINST.get(data.against, data.against)} "
                 "per save, each candidate (geomean over its cases)",
                 font_size="15", font_weight="bold")]
    values = [p.speedup for pts in data.series.values() for p in pts]
    if not values:
        out.append(_text(left, top + 60, "no passing benchmark of this operator yet", fill="#666"))
        return out, top + 90
    y = _LogAxis(values, plot_bottom, plot_top)
    span = max(1, data.saves - 1)

    def x(save: int) -> float:
        return left + (save - 1) / span * (right - left) if data.saves > 1 else (left + right) / 2

    out += _axis_y(y, left, right)
    out.append(_text((left + right) / 2, plot_bottom + 30, f"save (1 = oldest of {data.saves} benchmarked)",
                     text_anchor="middle", fill="#444"))
    for i, (cand, pts) in enumerate(sorted(data.series.items())):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{x(p.save):.1f},{y(p.speedup):.1f}" for p in pts)
        g = [f'<g class="series" data-candidate="{escape(cand, {chr(34): "&quot;"})}">',
             f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>']
        for p in pts:
            tip = f"{cand} {p.sha[:8]} {p.time[:19].replace('T', ' ')}: {format_speedup(p.speedup)}"
            g.append(f'<circle cx="{x(p.save):.1f}" cy="{y(p.speedup):.1f}" r="3.5" fill="{color}">'
                     f"<title>{escape(tip)}</title></circle>")
        g.append("</g>")
        out += g
        ly = plot_top + 6 + 18 * i
        out.append(f'<rect x="{right + 20:.1f}" y="{ly - 9:.1f}" width="12" height="12" fill="{color}"/>')
        out.append(_text(right + 38, ly + 1, f"{cand} ({len(pts)}, last {format_speedup(pts[-1].speedup)})",
                         font_size="12"))
    return out, top + height


def _axis_y(y: _LogAxis, left: float, right: float) -> list[str]:
    out = []
    for t in y.ticks():
        py = y(t)
        stroke = "#333" if t == 1 else "#ddd"
        dash = ' stroke-dasharray="5,4"' if t == 1 else ""
        out.append(f'<line x1="{left:.1f}" y1="{py:.1f}" x2="{right:.1f}" y2="{py:.1f}" stroke="{stroke}"{dash}/>')
        out.append(_text(left - 8, py + 4, _tick(t), text_anchor="end", font_size="11", fill="#444"))
    return out


def _cases_panel(data: PlotData, top: float) -> tuple[list[str], float]:
    cases = data.cases[:BARS_SHOWN]
    out = [_text(70, top + 22, f"per-case speedup of the best variant, {data.best or '-'} (worst first; against {data.against})",
                 font_size="15", font_weight="bold")]
    if not cases:
        out.append(_text(70, top + 50, "no per-case figures for the best variant", fill="#666"))
        return out, top + 70
    label_w, row_h, bar_top = 330.0, 18.0, top + 40
    x = _LogAxis([s for _, s in cases], label_w, WIDTH - 90.0)
    one = x(1.0)
    bottom = bar_top + row_h * len(cases)
    for t in x.ticks():
        px = x(t)
        stroke = "#333" if t == 1 else "#e4e4e4"
        out.append(f'<line x1="{px:.1f}" y1="{bar_top - 4:.1f}" x2="{px:.1f}" y2="{bottom:.1f}" stroke="{stroke}"/>')
        out.append(_text(px, bottom + 14, _tick(t), text_anchor="middle", font_size="11", fill="#444"))
    out.append('<g class="cases">')
    for i, (label, sp) in enumerate(cases):
        cy = bar_top + row_h * i
        px = x(sp)
        color = "#d62728" if sp < 1 else "#2ca02c"
        out.append(_text(label_w - 8, cy + 12, label[:52], text_anchor="end", font_size="11"))
        out.append(f'<rect x="{min(px, one):.1f}" y="{cy + 2:.1f}" width="{abs(px - one):.1f}" height="{row_h - 5:.1f}" '
                   f'fill="{color}"><title>{escape(label)}: {format_speedup(sp)}</title></rect>')
        out.append(_text(max(px, one) + 4, cy + 12, format_speedup(sp), font_size="11", fill="#333"))
    out.append("</g>")
    if len(data.cases) > len(cases):
        out.append(_text(label_w, bottom + 30, f"and {len(data.cases) - len(cases)} more case(s)", fill="#666"))
    return out, bottom + 40


def render_svg(data: PlotData) -> str:
    """The picture of ``data`` as an SVG document."""
    body, y = _series_panel(data, 0.0)
    cases, y = _cases_panel(data, y + 10)
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y:.0f}" viewBox="0 0 {WIDTH} {y:.0f}" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f'<rect width="{WIDTH}" height="{y:.0f}" fill="white"/>',
        *body,
        *cases,
        "</svg>",
        "",
    ])
