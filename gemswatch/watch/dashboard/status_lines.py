"""The dashboard's status lines: notes, with repeats collapsed into a count.

``config.yaml reloaded`` three times is one line, ``config.yaml reloaded
(x3)``; lines that differ only in their numbers (a warm pool's pid and
preload time) are repeats of each other, shown as the latest with the count.
A line about a file (a :class:`~gemswatch.watch.notes.Note`) is dropped
once that file is mapped. Pure: no clock, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

__all__ = ["StatusLine", "StatusLines"]

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _kind(text: str) -> str:
    """What makes two lines repeats: the text with every number blanked."""
    return _NUMBER.sub("#", text)


@dataclass
class StatusLine:
    text: str  # the latest of its repeats
    count: int = 1
    about: str | None = None

    def shown(self) -> str:
        return self.text if self.count == 1 else f"{self.text} (x{self.count})"


class StatusLines:
    """The latest distinct notes, newest last; ``shown`` of them are drawn."""

    def __init__(self, shown: int = 3, kept: int = 20):
        self.shown = shown
        self.kept = kept
        self._lines: list[StatusLine] = []

    def add(self, text: str, about: str | None = None) -> None:
        """Note ``text``; a repeat of a kept line moves it last and counts it."""
        about = about if about is not None else getattr(text, "about", None)
        kind = _kind(str(text))
        count = 1
        for i, line in enumerate(self._lines):
            if _kind(line.text) == kind:
                count += self._lines.pop(i).count
                break
        self._lines.append(StatusLine(str(text), count, about))
        del self._lines[: -self.kept]

    append = add  # a deque's name for it

    def forget_about(self, paths: Iterable[str]) -> bool:
        """Drop the lines about any of ``paths``; True when one went."""
        gone = set(paths)
        before = len(self._lines)
        self._lines = [line for line in self._lines if line.about not in gone]
        return len(self._lines) != before

    def lines(self) -> list[StatusLine]:
        """The lines to draw, oldest first."""
        return self._lines[-self.shown :] if self.shown else []

    def __iter__(self) -> Iterator[str]:
        return (line.shown() for line in self.lines())

    def __len__(self) -> int:
        return len(self.lines())
