"""A FILE argument of ``show``, ``ab`` and ``profile``: the file, and its mapping.

A path is tried as given (from the current folder), then from the project
and the watched folder; :func:`find_file` returns the absolute path or
None, and :func:`mapped` the :class:`~gemswatch.watch.mapping.Candidate`
the config maps it to (None for a file no ``candidates:`` glob matches).
"""

from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..mapping import Candidate, CandidateMap

__all__ = ["find_file", "mapped"]


def find_file(config: Config, text: str) -> Path | None:
    for base in (Path.cwd(), config.project, config.watch):
        path = (base / text).resolve()
        if path.is_file():
            return path
    return None


def mapped(config: Config, path: Path) -> Candidate | None:
    return CandidateMap(config).lookup(path)
