"""Coalesce bursts of file changes into batches; pure and clock-injected.

A batch is ready when no change has arrived for ``step`` seconds, or once
``window`` seconds have passed since its first change, whichever is first:
an editor's write-temp-then-rename lands as one batch, and a file rewritten
continuously still produces a batch every ``window`` seconds.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, Iterable

__all__ = ["Debouncer"]


class Debouncer:
    """Accumulate changes and hand them out in batches.

    Args:
        step: quiet time that closes a batch (seconds).
        window: the longest a batch stays open (seconds).
        clock: a monotonic clock; tests pass a fake one.
    """

    def __init__(self, step: float = 0.08, window: float = 1.0, clock: Callable[[], float] = time.monotonic):
        if step <= 0 or window < step:
            raise ValueError(f"need 0 < step <= window, got step={step}, window={window}")
        self.step = step
        self.window = window
        self.clock = clock
        self._batch: dict[Hashable, None] = {}
        self._first: float | None = None
        self._last: float | None = None

    def add(self, changes: Iterable[Hashable]) -> None:
        """Add changes to the open batch (duplicates collapse; order is kept)."""
        now = self.clock()
        seen = False
        for c in changes:
            self._batch.setdefault(c, None)
            seen = True
        if seen:
            # Any event, even a repeat, means the writer is still busy.
            if self._first is None:
                self._first = now
            self._last = now

    def pending(self) -> bool:
        return bool(self._batch)

    def deadline(self) -> float | None:
        """When the open batch will be ready (clock time), or None if there is none."""
        if not self._batch:
            return None
        assert self._first is not None and self._last is not None
        return min(self._last + self.step, self._first + self.window)

    def poll(self) -> list[Hashable] | None:
        """The batch if it is ready (and a new one starts), else None."""
        d = self.deadline()
        if d is None or self.clock() < d:
            return None
        return self.flush()

    def flush(self) -> list[Hashable]:
        """Whatever is pending, ready or not."""
        batch = list(self._batch)
        self._batch.clear()
        self._first = self._last = None
        return batch
