"""The dashboard's state and its reducer: events in, nothing drawn.

``DashboardState.apply(event)`` folds one event into the state; the pane
methods (scroll, expand, help) change what the lower half shows. Rendering
is :mod:`.screen`'s.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..events import headline
from ..status import FAILURES, STAGES
from .status_lines import StatusLines

__all__ = ["Cell", "Row", "Pane", "DashboardState", "DEFAULT_FOOTER"]

_GOOD = ("passed",)
DEFAULT_FOOTER = "r rerun all · f rerun failed · b benchmark · ↑↓ select · o log · ? keys · q quit"


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
    log: str = ""  # the stage's log file
    coverage: dict[str, Any] = field(default_factory=dict)  # a correctness stage's: operator -> axes covered


@dataclass
class Row:
    candidate: str
    operators: list[str] = field(default_factory=list)
    cells: dict[str, Cell] = field(default_factory=dict)
    speedup: float | None = None
    speedup_prev: float | None = None
    speedup_sha: str = ""  # the bytes the speedup was measured on
    speedup_vs: str = "eager"  # its baseline: "best" of eager and torch.compile, "gems" (CPU), "eager"
    last_time: str = ""
    sha: str = ""
    stale: bool = False
    run_id: str = ""
    failure: dict[str, Any] | None = None  # the latest non-passing stage_finished
    log_tail: str = ""
    per_case: list[dict[str, Any]] = field(default_factory=list)  # the benchmark's cases, worst first


@dataclass
class Pane:
    """How the detail pane is shown: its scroll offset (in lines), whether
    it is expanded, and whether the help overlay covers it."""

    scroll: int = 0
    expanded: bool = False
    help: bool = False


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
    notes: StatusLines = field(default_factory=StatusLines)
    selected: int | None = None
    now: float = 0.0
    recent_failure: str | None = None
    done: bool = False
    version: int = 0  # bumped on every change, so an idle screen is not redrawn
    footer: str = DEFAULT_FOOTER
    pane: Pane = field(default_factory=Pane)
    width: int = 80  # of the screen last drawn (the pane's scroll limit counts wrapped lines)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    # -- the reducer ----------------------------------------------------------

    def row(self, candidate: str) -> Row:
        r = self.rows.get(candidate)
        if r is None:
            r = self.rows[candidate] = Row(candidate)
            self.rows = dict(sorted(self.rows.items()))
        return r

    def set_candidates(self, items: list[tuple[str, list[str]]]) -> None:
        """Show exactly these candidates (rel path, operators); a note about
        a file that is now mapped (its "not mapped" hint) goes."""
        self.version += 1
        keep = {rel for rel, _ in items}
        for rel in list(self.rows):
            if rel not in keep:
                del self.rows[rel]
        for rel, ops in items:
            self.row(rel).operators = list(ops)
        self.notes.forget_about(keep)
        if self.selected is not None and self.selected >= len(self.rows):
            self.selected = len(self.rows) - 1 if self.rows else None

    def note(self, text: str) -> None:
        """A status line (repeats collapse into a count). The warm pool's
        "warm start: X" says what the warm line above the table already
        shows ("warm: X"), and is left out."""
        self.version += 1
        if self.warm and text.startswith("warm start: ") and text.removeprefix("warm start: ") == self.warm.removeprefix("warm: "):
            return
        self.notes.add(text)

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
            log=str(ev.get("log") or ""),
            coverage=dict(ev["coverage"]) if isinstance(ev.get("coverage"), dict) else {},
        )
        if stage == "benchmark" and ev.get("status") == "passed":
            _take_speedup(row, ev)
        if ev.get("status") in FAILURES:
            if row.failure is None or row.failure.get("run_id") != ev.get("run_id") or row.failure.get("stage") != stage:
                self.pane.scroll = 0  # a new failure is read from its top
            row.failure = dict(ev)
        elif ev.get("status") in _GOOD and row.failure and row.failure.get("stage") == stage:
            row.failure = None
        if "log_tail" in ev:
            row.log_tail = ev["log_tail"]

    # -- selection and the pane -----------------------------------------------

    def select(self, delta: int) -> None:
        self.version += 1
        n = len(self.rows)
        if not n:
            self.selected = None
            return
        self.selected = (0 if delta > 0 else n - 1) if self.selected is None else (self.selected + delta) % n
        self.pane.scroll = 0

    def selected_candidate(self) -> str | None:
        if self.selected is None or not self.rows:
            return None
        return list(self.rows)[min(self.selected, len(self.rows) - 1)]

    def focused(self) -> str | None:
        """The row the detail pane is about: the selected one, else the latest failure."""
        return self.selected_candidate() or (self.recent_failure if self.recent_failure in self.rows else None)

    def scroll(self, lines: int, limit: int) -> None:
        """Move the detail pane by ``lines``, to at most ``limit`` (where its
        last line shows)."""
        self.version += 1
        self.pane.scroll = max(0, min(self.pane.scroll + lines, limit))

    def toggle_expanded(self) -> None:
        self.version += 1
        self.pane.expanded = not self.pane.expanded

    def toggle_help(self) -> None:
        self.version += 1
        self.pane.help = not self.pane.help

    def close(self) -> None:
        """Esc: close the help, else collapse the pane."""
        self.version += 1
        if self.pane.help:
            self.pane.help = False
        else:
            self.pane.expanded = False

    def log_to_open(self) -> str | None:
        """The log ``o`` opens: the focused row's failing stage's, else its
        latest finished stage's."""
        cand = self.focused()
        row = self.rows.get(cand) if cand else None
        if row is None:
            return None
        if row.failure and row.failure.get("log"):
            return str(row.failure["log"])
        for stage in reversed(STAGES):
            cell = row.cells.get(stage)
            if cell is not None and cell.log:
                return cell.log
        return None


def _take_speedup(row: Row, rec: dict[str, Any]) -> None:
    """Show the speedup of a passed benchmark record, and the bytes it was measured on."""
    row.speedup, row.speedup_vs = headline(rec)
    row.speedup_prev = rec.get("speedup_prev")
    row.speedup_sha = str(rec.get("content_sha256", ""))
    row.per_case = [c for c in rec.get("per_case") or [] if isinstance(c, dict)]
