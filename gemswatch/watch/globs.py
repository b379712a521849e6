"""Path-style globs and the candidate files under a folder.

Globs are relative to the watched folder: ``*`` never crosses a ``/`` and
``**`` matches any number of folders (``**/*.py`` matches ``a.py`` and
``x/y/a.py``). Pure helpers shared by config validation and the mapping.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from pathlib import Path

from .filters import IGNORED_DIRS

__all__ = ["discover_files", "match_glob"]


def match_glob(pattern: str, rel: str) -> bool:
    """True when the posix path ``rel`` matches ``pattern`` (``**`` spans folders)."""
    return _match(pattern.strip("/").split("/"), rel.split("/"))


def _match(pat: list[str], parts: list[str]) -> bool:
    if not pat:
        return not parts
    head = pat[0]
    if head == "**":
        return any(_match(pat[1:], parts[i:]) for i in range(len(parts) + 1))
    if not parts:
        return False
    return fnmatchcase(parts[0], head) and _match(pat[1:], parts[1:])


def discover_files(folder: Path, suffix: str = ".py") -> list[Path]:
    """Every ``suffix`` file under ``folder``, skipping ignored folders, sorted."""
    out: list[Path] = []
    skip = set(IGNORED_DIRS)
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(suffix) and not name.startswith("."):
                out.append(Path(dirpath) / name)
    return out
