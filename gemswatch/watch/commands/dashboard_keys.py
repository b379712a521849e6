"""What the dashboard's keys do in ``gemswatch [DIR]``: the session's runs,
quitting, a profile of the slowest case, and a log opened in ``$PAGER``
with the screen and the key reader stepped aside
(:class:`~..dashboard.keymap.Actions`)."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from ..dashboard.pager import open_in_pager
from ..profiling import NoCase, choose_case, profile_case
from ..stage.executor import WarmForkExecutor

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
        self._profiling = threading.Lock()  # one profile at a time

    def rerun_all(self) -> None:
        self.session.run_all("rerun all", force=True)

    def rerun_failed(self) -> None:
        self.session.rerun_failed()

    def benchmark(self, candidate: str | None) -> None:
        self.session.benchmark_now([candidate] if candidate else None)

    def quit(self) -> None:
        self.stop.set()

    def profile(self, candidate: str) -> None:
        cand = next((c for c in self.session.candidates() if c.rel == candidate), None)
        if cand is None:
            self.say(f"p: {candidate} is not a mapped candidate any more")
        elif not self._profiling.acquire(blocking=False):
            self.say("p: a profile is running already; its summary comes here when it ends")
        else:
            threading.Thread(target=self._profile, args=(cand,), name="gemswatch-profile", daemon=True).start()

    def _profile(self, cand) -> None:
        try:
            try:
                narrowed, case = choose_case(self.session.config, cand)
            except NoCase as e:
                self.say(f"p: {e}")
                return
            self.say(f"profiling {cand.rel}: {case.label or case.case_id} ...")
            warm = self.session.warm
            executor = WarmForkExecutor(warm) if warm is not None else None
            r = profile_case(self.session.config, narrowed, case, cancel=self.stop, executor=executor)
            if not r.ok:
                self.say(f"profile of {cand.rel} failed: {r.message}")
                return
            self.say(f"profile of {cand.rel} ({r.tool}): {r.report}" + (f" ({r.note})" if r.note else ""))
            for line in r.lines:
                self.say("  " + line)
        except Exception as e:  # a profile must never take the watcher down
            self.say(f"profile of {cand.rel} failed: {type(e).__name__}: {e}")
        finally:
            self._profiling.release()

    def open_log(self, path: str) -> None:
        paused = self.keys.paused() if self.keys is not None else contextlib.nullcontext()
        with self.out.view.suspended(), paused:
            why = open_in_pager(path)
        if why:
            self.say(why)

    def say(self, text: str) -> None:
        self.out.note(text)
