"""Atomic report writing: a reader sees the old file or the new one, never a
partial write or a merge.

Imports only the standard library: never torch, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_text_atomic", "write_json_atomic"]


def _umask() -> int:
    """This process's umask, read without changing it (Linux), else 0o022."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0o022


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and
    ``os.replace``; the file gets the mode a plain ``open`` would give it
    (a temp file is private), like the logs beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON (non-JSON values as ``str``)."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
