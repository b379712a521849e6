"""Open a log in the user's pager (or editor) while the dashboard steps aside.

``$PAGER`` first (a log is read, not edited), then ``$EDITOR``, then
``less``; each may carry arguments (``less -R``). The caller suspends the
screen and the key reader around :func:`open_in_pager`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Callable, Mapping, Sequence

__all__ = ["viewer_command", "open_in_pager"]

Runner = Callable[[Sequence[str]], int]


def viewer_command(path: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The command that shows ``path``: ``$PAGER``, else ``$EDITOR``, else less."""
    env = os.environ if env is None else env
    for var in ("PAGER", "EDITOR"):
        text = (env.get(var) or "").strip()
        if text:
            try:
                words = shlex.split(text)
            except ValueError:
                words = text.split()
            if words:
                return [*words, path]
    return ["less", path]


def open_in_pager(path: str, env: Mapping[str, str] | None = None, run: Runner | None = None) -> str | None:
    """Show ``path`` and wait for the viewer to exit; None, or one line saying
    why it could not be shown."""
    if not os.path.exists(path):
        return f"o: {path} does not exist (the run folder was removed?)"
    cmd = viewer_command(path, env)
    try:
        (run or subprocess.call)(cmd)
    except OSError as e:
        return f"o: could not start {cmd[0]!r} ({e.strerror or e}); set $PAGER or $EDITOR to a viewer"
    return None
