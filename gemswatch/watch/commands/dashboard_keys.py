"""What the dashboard's keys do in ``gemswatch [DIR]``: the session's runs,
quitting, and a log opened in ``$PAGER`` with the screen and the key reader
stepped aside (:class:`~..dashboard.keymap.Actions`)."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from ..dashboard.pager import open_in_pager

if TYPE_CHECKING:
    from ..keys import KeyReader
    from ..session import Session
    from .output import Output

__all__ = ["WatchActions"]


class WatchActions:
    """The :class:`~..dashboard.keymap.Actions` of a watch session."""

    def __init__(self, session: "Session", out: "Output", stop: threading.Event):
        self.session = session
        self.out = out
        self.stop = stop
        self.keys: "KeyReader | None" = None  # set once the key reader runs

    def rerun_all(self) -> None:
        self.session.run_all("rerun all", force=True)

    def rerun_failed(self) -> None:
        self.session.rerun_failed()

    def benchmark(self, candidate: str | None) -> None:
        self.session.benchmark_now([candidate] if candidate else None)

    def quit(self) -> None:
        self.stop.set()

    def open_log(self, path: str) -> None:
        paused = self.keys.paused() if self.keys is not None else contextlib.nullcontext()
        with self.out.view.suspended(), paused:
            why = open_in_pager(path)
        if why:
            self.say(why)

    def say(self, text: str) -> None:
        self.out.note(text)
