"""Where a stage's time went: the moments of its session, for its log.

A slow save is slow somewhere: starting the candidate's worker, loading the
candidate (its imports, its first CUDA call), collecting the tests, the first
case (compiling its kernels), or the rest of the cases. The session notes
each moment as it passes (:class:`StageClock`), and its log's last lines say
them, counted from the session's configure, e.g.
``gemswatch: stage clock, s after configure: worker started 0.01, candidate
loaded 0.92, collected 1.10, first test 2.31, tests done 8.70``. The stage's
duration in the watcher's event, less the last figure, is what the process
spent before configure (its start and imports) and after.

Standard library and pytest only.
"""

from __future__ import annotations

import time

import pytest

__all__ = ["StageClock"]


class StageClock:
    """Named moments of one session, in seconds after it was made; a pytest
    plugin too, for the moments pytest's hooks mark."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        self.marks.append((name, self._clock() - self._start))

    def line(self) -> str:
        return "stage clock, s after configure: " + ", ".join(f"{name} {s:.2f}" for name, s in self.marks)

    # -- pytest's moments ----------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.mark("collected")

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if not any(name == "first test" for name, _ in self.marks):
            self.mark("first test")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.mark("tests done")
