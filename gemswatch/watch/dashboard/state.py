"""The live dashboard: a state fed by events, and a pure ``render(state)``.

``DashboardState.apply(event)`` folds one event into the state;
``render(state)`` turns the state into a rich renderable and does no I/O,
so a fixed-width Console renders it the same way in tests. ``LiveView``
refreshes it a few times a second with rich's ``Live``.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .events import format_speedup
from .status import FAILURES, STAGES

__all__ = ["Cell", "Row", "DashboardState", "render", "render_summary", "LiveView", "STATUS_STYLE"]

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
_GOOD = ("passed",)


@dataclass
class Cell:
    status: str = ""
    cases: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    started: float | None = None  # monotonic time while running
    duration: float | None = None
    message: str = ""
    seed: int | None = None  # of a correctness stage's drawn cases
    skips: dict[str, int] = field(default_factory=dict)  # why cases were skipped: reason -> count


@dataclass
class Row:
    candidate: str
    operators: list[str] = field(default_factory=list)
    cells: dict[str, Cell] = field(default_factory=dict)
    speedup: float | None = None
    speedup_prev: float | None = None
    speedup_sha: str = ""  # the bytes the speedup was measured on
    last_time: str = ""
    sha: str = ""
    stale: bool = False
    run_id: str = ""
    failure: dict[str, Any] | None = None  # the latest non-passing stage_finished
    log_tail: str = ""
    per_case: list[dict[str, Any]] = field(default_factory=list)  # the benchmark's cases, worst first


@dataclass
class DashboardState:
    """Everything the screen shows. Mutate it only under ``lock``."""

    watch: str = ""
    project: str = ""
    device: str = ""
    jobs: int = 1
    benchmark: str = "manual"
    warm: str = ""  # the warm-start state line ("warm: pool ... ready", "cold: why")
    config_error: str | None = None
    rows: dict[str, Row] = field(default_factory=dict)
    notes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=3))
    selected: int | None = None
    now: float = 0.0
    recent_failure: str | None = None
    done: bool = False
    version: int = 0  # bumped on every change, so an idle screen is not redrawn
    footer: str = "r rerun all · f rerun failed · b benchmark · ↑/↓ select · q quit"
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    # -- the reducer ----------------------------------------------------------

    def row(self, candidate: str) -> Row:
        r = self.rows.get(candidate)
        if r is None:
            r = self.rows[candidate] = Row(candidate)
            self.rows = dict(sorted(self.rows.items()))
        return r

    def set_candidates(self, items: list[tuple[str, list[str]]]) -> None:
        """Show exactly these candidates (rel path, operators)."""
        self.version += 1
        keep = {rel for rel, _ in items}
        for rel in list(self.rows):
            if rel not in keep:
                del self.rows[rel]
        for rel, ops in items:
            self.row(rel).operators = list(ops)
        if self.selected is not None and self.selected >= len(self.rows):
            self.selected = len(self.rows) - 1 if self.rows else None

    def load_history(self, last: dict[str, dict[str, dict[str, Any]]], current_sha: dict[str, str]) -> None:
        """Show each file's last known result; stale when its bytes changed since.

        ``last`` maps candidate -> stage -> latest stage_finished record; the
        cells show the latest run's stages, the speedup the latest benchmark.
        """
        self.version += 1
        for cand, stages in last.items():
            if cand not in self.rows or not stages:
                continue
            row = self.rows[cand]
            latest = max(stages.values(), key=lambda r: str(r.get("time", "")))
            for stage, rec in stages.items():
                if rec.get("run_id") == latest.get("run_id"):
                    self._finish_cell(row, rec)
                elif stage == "benchmark" and rec.get("status") == "passed":
                    _take_speedup(row, rec)
            row.run_id = str(latest.get("run_id", ""))
            row.sha = str(latest.get("content_sha256", ""))
            row.stale = current_sha.get(cand) not in (None, row.sha)
            row.last_time = str(latest.get("time", ""))[11:19]

    def apply(self, ev: dict[str, Any], now: float | None = None) -> None:
        """Fold one event into the state."""
        now = time.monotonic() if now is None else now
        self.version += 1
        kind = ev.get("event")
        cand = ev.get("candidate")
        if kind == "config_error":
            self.config_error = "\n".join(ev.get("errors_text") or []) or "config error"
            return
        if kind in ("watch_started", "config_reloaded"):
            self.config_error = None
            return
        if not cand:
            return
        row = self.row(cand)
        if ev.get("operators"):
            row.operators = list(ev["operators"])
        if kind == "run_queued":
            row.run_id = ev.get("run_id", "")
            stages = list(ev.get("stages") or [])
            if stages != ["benchmark"] or ev.get("content_sha256") != row.sha:
                # new bytes: results of stages this run skips are no longer theirs
                for s in list(row.cells):
                    if s not in stages:
                        del row.cells[s]
            row.sha = ev.get("content_sha256", "")
            row.stale = False
            for s in stages:
                row.cells[s] = Cell("queued")
        elif kind == "stage_started":
            if ev.get("run_id") != row.run_id:
                return
            row.cells[ev["stage"]] = Cell("running", started=now)
        elif kind == "stage_finished":
            if ev.get("run_id") != row.run_id:
                return
            self._finish_cell(row, ev)
            row.last_time = str(ev.get("time", ""))[11:19]
            if ev.get("status") in FAILURES:
                self.recent_failure = cand
        elif kind == "run_finished":
            if ev.get("run_id") != row.run_id:
                return
            # superseded: the newer run's cells are already queued
            for s, cell in row.cells.items():
                if cell.status in ("queued", "running") and ev.get("status") == "superseded":
                    cell.status = "superseded"
                    cell.started = None

    def _finish_cell(self, row: Row, ev: dict[str, Any]) -> None:
        stage = ev.get("stage")
        if stage not in STAGES:
            return
        row.cells[stage] = Cell(
            status=str(ev.get("status")),
            cases=dict(ev.get("cases") or {}),
            calls=sum((ev.get("candidate_calls") or {}).values()),
            duration=ev.get("duration_s"),
            message=str(ev.get("message") or ""),
            seed=ev.get("seed") if isinstance(ev.get("seed"), int) else None,
            skips={str(k): v for k, v in (ev.get("skips") or {}).items() if isinstance(v, int)},
        )
        if stage == "benchmark" and ev.get("status") == "passed":
            _take_speedup(row, ev)
        if ev.get("status") in FAILURES:
            row.failure = dict(ev)
        elif ev.get("status") in _GOOD and row.failure and row.failure.get("stage") == stage:
            row.failure = None
        if "log_tail" in ev:
            row.log_tail = ev["log_tail"]

    def select(self, delta: int) -> None:
        self.version += 1
        n = len(self.rows)
        if not n:
            self.selected = None
            return
        self.selected = (0 if delta > 0 else n - 1) if self.selected is None else (self.selected + delta) % n

    def selected_candidate(self) -> str | None:
        if self.selected is None or not self.rows:
            return None
        return list(self.rows)[min(self.selected, len(self.rows) - 1)]


def _take_speedup(row: Row, rec: dict[str, Any]) -> None:
    """Show the speedup of a passed benchmark record, and the bytes it was measured on."""
    row.speedup = rec.get("speedup")
    row.speedup_prev = rec.get("speedup_prev")
    row.speedup_sha = str(rec.get("content_sha256", ""))
    row.per_case = [c for c in rec.get("per_case") or [] if isinstance(c, dict)]


# ---------------------------------------------------------------------------
# rendering (pure)


def _status_text(status: str) -> Text:
    return Text(status or "-", style=STATUS_STYLE.get(status, ""))


def _cell(cell: Cell | None, now: float) -> Text:
    if cell is None or not cell.status:
        return Text("-", style="dim")
    t = _status_text(cell.status)
    c = cell.cases
    bits: list[str] = []
    if cell.status == "running" and cell.started is not None:
        bits.append(f"{max(0.0, now - cell.started):.1f}s")
    elif c.get("total"):
        part = f"{c.get('passed', 0)}/{c.get('total', 0)}"
        if c.get("failed"):
            part += f" {c['failed']}✗"
        if c.get("skipped"):
            part += f" ({c['skipped']} skipped)"
        bits.append(part)
    if cell.calls:
        bits.append(f"{cell.calls} calls")
    if cell.duration is not None and cell.status not in ("running", "queued", "not_run"):
        bits.append(f"{cell.duration:.1f}s")
    if cell.seed is not None:
        bits.append(f"seed {cell.seed}")
    if bits:
        t.append("\n" + " · ".join(bits), style="dim")
    return t


def _speedup(row: Row) -> Text:
    if row.speedup is None:
        return Text("-", style="dim")
    if row.speedup_sha and row.sha and row.speedup_sha != row.sha:
        # measured on earlier bytes: shown, but not as this file's result
        return Text(f"{format_speedup(row.speedup)}\nearlier {row.speedup_sha[:8]}", style="dim")
    t = Text(format_speedup(row.speedup), style="bold")
    if row.speedup_prev:
        t.append("\n")
        t.append_text(_change(row.speedup, row.speedup_prev))
    worst = row.per_case[0].get("speedup") if row.per_case else None
    if isinstance(worst, (int, float)) and len(row.per_case) > 1:
        t.append(f"\nworst {format_speedup(worst)}", style="red" if worst < 1 else "dim")
    return t


def _change(now: float, before: float) -> Text:
    change = (now / before - 1) * 100
    style = "green" if change > 0.5 else "red" if change < -0.5 else "dim"
    return Text(f"{change:+.1f}%", style=style)


PER_CASE_SHOWN = 8  # rows of the per-shape table in the pane


def _per_case_table(row: Row) -> Table:
    """The selected row's benchmark cases, worst speedup first."""
    t = Table(box=box.SIMPLE, pad_edge=False, expand=False)
    for name in ("case", "candidate", "baseline", "speedup", "change", "roofline"):
        t.add_column(name, no_wrap=name != "case", overflow="fold", justify="left" if name == "case" else "right")
    for c in row.per_case[:PER_CASE_SHOWN]:
        speedup, prev = c.get("speedup"), c.get("prev")
        roof = (f"{c['pct_of_copy']:.0f}% copy" if isinstance(c.get("pct_of_copy"), (int, float))
                else f"{c['tflops']:.1f} TFLOP/s" if isinstance(c.get("tflops"), (int, float)) else "-")
        t.add_row(
            str(c.get("label") or c.get("case")),
            _ms(c.get("latency_ms")),
            _ms(c.get("base_ms")),
            format_speedup(speedup) if isinstance(speedup, (int, float)) else "-",
            _change(speedup, prev) if isinstance(speedup, (int, float)) and isinstance(prev, (int, float)) and prev else "-",
            roof,
        )
    more = len(row.per_case) - PER_CASE_SHOWN
    if more > 0:
        t.caption = f"and {more} more case(s) in the benchmark report"
    return t


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value * 1e3:.1f} us" if value < 1 else f"{value:.2f} ms"


def render(state: DashboardState) -> RenderableType:
    """The whole screen for ``state``."""
    head = Text()
    head.append("gemswatch ", style="bold")
    head.append(f"watching {state.watch}", style="cyan")
    head.append(f" · project {state.project} · {state.device} · jobs {state.jobs} · benchmark {state.benchmark}", style="dim")
    parts: list[RenderableType] = [head]
    if state.warm:
        parts.append(Text(state.warm, style="dim" if state.warm.startswith("warm") else "yellow"))
    if state.config_error:
        parts.append(
            Panel(Text(state.config_error, style="red"), title="config.yaml error - keeping the last good config", border_style="red")
        )
    table = Table(box=box.SIMPLE_HEAVY, expand=True, pad_edge=False)
    table.add_column("", width=1, no_wrap=True)
    table.add_column("candidate", max_width=40, overflow="fold")
    table.add_column("operators", max_width=24, overflow="fold")
    for s in STAGES:
        table.add_column(s, ratio=2, min_width=10, overflow="fold")
    table.add_column("speedup", min_width=8, no_wrap=True)
    table.add_column("last run", min_width=8, no_wrap=True)
    sel = state.selected_candidate()
    for rel, row in state.rows.items():
        shown = rel[len(state.watch) :] if state.watch and rel.startswith(state.watch) else rel
        name = Text(shown, style="bold" if rel == sel else "")
        if row.sha:
            name.append(f"\n{row.sha[:8]}", style="dim")
        last = Text(row.last_time or "-", style="dim" if not row.last_time else "")
        if row.stale:
            last.append("\nstale", style="yellow")
        table.add_row(
            Text(">" if rel == sel else " ", style="bold"),
            name,
            Text(", ".join(row.operators)),
            *[_cell(row.cells.get(s), state.now) for s in STAGES],
            _speedup(row),
            last,
        )
    parts.append(table)
    if not state.rows:
        parts.append(Text("no mapped candidates: add files under `candidates:` in config.yaml", style="yellow"))
    focus = sel or state.recent_failure
    row = state.rows.get(focus) if focus else None
    skipped = _skip_lines(row) if row is not None and sel else []
    if row is not None and sel and row.per_case:
        parts.append(Panel(_per_case_table(row), title=f"{focus}: benchmark cases, worst first", border_style="dim"))
    if skipped and not row.failure:
        parts.append(Panel(Text("\n".join(skipped), style="dim"), title=f"{focus}: skipped cases", border_style="dim"))
    if row is not None and row.failure:
        f = row.failure
        body = Text()
        body.append(f"{f.get('stage')} {f.get('status')}", style=STATUS_STYLE.get(str(f.get("status")), ""))
        body.append(f": {f.get('message', '')}\n")
        if f.get("first_failure"):
            body.append(f"first failure: {f['first_failure']}\n", style="bold")
        detail = str(f.get("detail") or "")
        if detail and detail.strip() != str(f.get("message", "")).split(": ", 1)[-1].strip():
            body.append("\n".join(detail.splitlines()[:8]) + "\n")
        if row.log_tail:
            body.append("\n".join(row.log_tail.rstrip().splitlines()[-8:]) + "\n", style="dim")
        if f.get("log"):
            body.append(f"log: {f['log']}", style="dim")
        parts.append(Panel(body, title=f"{focus}", border_style="red"))
    for n in state.notes:
        parts.append(Text(n, style="yellow"))
    if state.footer:
        parts.append(Text(state.footer, style="dim"))
    return Group(*parts)


def _skip_lines(row: Row) -> list[str]:
    """Why the selected row's cases were skipped, stage by stage."""
    lines = []
    for stage in STAGES:
        cell = row.cells.get(stage)
        if cell is None or not cell.skips:
            continue
        lines.append(f"{stage}: {cell.cases.get('skipped', sum(cell.skips.values()))} of {cell.cases.get('total', '?')} skipped")
        lines += [f"  {n} x {reason}" for reason, n in cell.skips.items()]
    return lines


def render_summary(state: DashboardState) -> RenderableType:
    """A compact table of final results (printed on exit)."""
    t = Table(box=box.SIMPLE, title="gemswatch summary", title_justify="left")
    t.add_column("candidate")
    t.add_column("operators")
    for s in STAGES:
        t.add_column(s)
    t.add_column("speedup")
    for rel, row in state.rows.items():
        t.add_row(
            rel,
            ", ".join(row.operators),
            *[_status_text(row.cells[s].status) if s in row.cells else Text("-", style="dim") for s in STAGES],
            format_speedup(row.speedup) if row.speedup else "-",
        )
    return t


# ---------------------------------------------------------------------------
# the live view


class LiveView:
    """Refresh ``render(state)`` with rich's Live until told to stop."""

    def __init__(self, state: DashboardState, console: Console, refresh_per_second: float = 4.0):
        self.state = state
        self.console = console
        self.period = 1.0 / refresh_per_second

    def sink(self, ev: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.apply(ev)

    def note(self, text: str) -> None:
        with self.state.lock:
            self.state.notes.append(text)
            self.state.version += 1

    def _frame(self) -> RenderableType:
        with self.state.lock:
            self.state.now = time.monotonic()
            return render(self.state)

    def run(self, stop: threading.Event) -> None:
        from rich.live import Live

        with Live(self._frame(), console=self.console, auto_refresh=False, redirect_stdout=False, redirect_stderr=False, transient=False) as live:
            shown, drawn = -1, 0.0
            while not stop.is_set():
                with self.state.lock:
                    version = self.state.version
                    ticking = any(c.status == "running" for r in self.state.rows.values() for c in r.cells.values())
                # redraw on a change, for the elapsed timers, and now and then (terminal resizes)
                if version != shown or ticking or time.monotonic() - drawn > 2.0:
                    live.update(self._frame(), refresh=True)
                    shown, drawn = version, time.monotonic()
                stop.wait(self.period)
            live.update(self._frame(), refresh=True)
