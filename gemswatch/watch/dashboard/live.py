"""The live view: ``render(state)`` redrawn a few times a second on the
terminal's alternate screen, which is left on every way out (the end, an
exception, Ctrl-C), so the shell's screen comes back as it was. A pager
can borrow the terminal: :meth:`LiveView.suspended` leaves the alternate
screen until the pager is done.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator

from rich.console import Console, RenderableType

from .screen import render
from .state import DashboardState

__all__ = ["LiveView"]

SUSPEND_WAIT_S = 2.0  # how long a pager waits for the screen to step aside


class LiveView:
    """Refresh ``render(state)`` with rich's Live until told to stop."""

    def __init__(self, state: DashboardState, console: Console, refresh_per_second: float = 4.0):
        self.state = state
        self.console = console
        self.period = 1.0 / refresh_per_second
        self._running = False
        self._want_pause = threading.Event()
        self._paused = threading.Event()
        self._resume = threading.Event()

    def sink(self, ev: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.apply(ev)

    def note(self, text: str) -> None:
        with self.state.lock:
            self.state.note(text)

    def _frame(self) -> RenderableType:
        with self.state.lock:
            self.state.now = time.monotonic()
            self.state.width = self.console.width
            return render(self.state)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Leave the alternate screen for the duration (a pager runs), then
        draw again. A no-op when the view is not running."""
        if not self._running:
            yield
            return
        self._resume.clear()
        self._paused.clear()
        self._want_pause.set()
        self._paused.wait(SUSPEND_WAIT_S)
        try:
            yield
        finally:
            self._want_pause.clear()
            self._resume.set()

    def run(self, stop: threading.Event) -> None:
        """Draw until ``stop`` is set; the alternate screen is left however this ends."""
        self._running = True
        try:
            while not stop.is_set():
                self._draw(stop)
                if self._want_pause.is_set():
                    self._paused.set()
                    while not stop.is_set() and not self._resume.wait(self.period):
                        pass
        finally:
            self._running = False
            self._paused.set()  # a pager waiting on a view that ended

    def _draw(self, stop: threading.Event) -> None:
        from rich.live import Live

        with Live(self._frame(), console=self.console, auto_refresh=False, redirect_stdout=False,
                  redirect_stderr=False, transient=False, screen=True) as live:
            shown, drawn = -1, 0.0
            while not stop.is_set() and not self._want_pause.is_set():
                with self.state.lock:
                    version = self.state.version
                    ticking = any(c.status == "running" for r in self.state.rows.values() for c in r.cells.values())
                # redraw on a change, for the elapsed timers, and now and then (terminal resizes)
                if version != shown or ticking or time.monotonic() - drawn > 2.0:
                    live.update(self._frame(), refresh=True)
                    shown, drawn = version, time.monotonic()
                stop.wait(self.period)
