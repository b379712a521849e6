"""Which file-system changes matter: small pure filters.

A filter is called as ``filter(change, path) -> bool`` (True: keep). The
ignore lists are data on the object, so a test or a config can extend them.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import PurePath

__all__ = ["Change", "DefaultFilter", "PythonFilter", "IGNORED_DIRS", "IGNORED_NAMES"]


class Change(enum.IntEnum):
    """What happened to a path (a rename is a deletion plus an addition)."""

    added = 1
    modified = 2
    deleted = 3


IGNORED_DIRS: tuple[str, ...] = (
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".gemswatch",
    ".triton",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    ".venv",
    "venv",
    "node_modules",
    ".idea",
    ".vscode",
    "build",
    "dist",
    ".eggs",
)

# Editor swap, backup and temporary files; compiled and cache files.
IGNORED_NAMES: tuple[str, ...] = (
    r"\.sw[a-px]$",  # vim swap files and its .swx probe
    r"~$",  # backups (vim, emacs, gedit)
    r"^\.#",  # emacs lock files
    r"^#.*#$",  # emacs autosave
    r"^4913$",  # vim's write-permission probe
    r"\.tmp$",
    r"\.temp$",
    r"\.bak$",
    r"\.orig$",
    r"\.part$",
    r"\.py[cod]$",
    r"\.so$",
    r"^\.DS_Store$",
    r"^\.~lock\.",
    r"^\.goutputstream-",  # gedit atomic save temp
    r"___jb_(old|tmp)___$",  # JetBrains safe write
    r"^___jb_",
    r"\.crswap$",  # VS Code remote
    r"\.egg-info$",
)


@dataclass
class DefaultFilter:
    """Drop changes inside ignored folders and to editor or cache files."""

    ignore_dirs: tuple[str, ...] = IGNORED_DIRS
    ignore_names: tuple[str, ...] = IGNORED_NAMES
    _names_re: re.Pattern = field(init=False, repr=False)
    _dirs: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._names_re = re.compile("|".join(f"(?:{p})" for p in self.ignore_names))
        self._dirs = frozenset(self.ignore_dirs)

    def __call__(self, change: Change, path: str) -> bool:
        p = PurePath(path)
        if any(part in self._dirs for part in p.parts):
            return False
        return not self._names_re.search(p.name)


@dataclass
class PythonFilter(DefaultFilter):
    """The default filter, keeping only ``.py`` files and the named extra files."""

    extra_files: frozenset[str] = frozenset()

    def __call__(self, change: Change, path: str) -> bool:
        if path in self.extra_files:
            return True
        return path.endswith(".py") and super().__call__(change, path)
