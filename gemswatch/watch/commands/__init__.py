"""The ``gemswatch`` commands, one function per command word.

:mod:`gemswatch.watch.cli` parses the command line and calls one of these
with the parsed arguments; each returns the process exit code. The two that
run stages (``watch``, ``run``) are in :mod:`.pipeline`, the read-only
reports (``list``, ``history``) in :mod:`.reports` and ``show`` in
:mod:`.show`, the one-off measurements ``ab`` and ``profile`` in :mod:`.ab`
and :mod:`.profile`, ``new`` in :mod:`.new_candidate`; what they share is the output wiring
(:mod:`.output`) and the config and session set-up (:mod:`.session_setup`).
Like the rest of the watcher, nothing here imports torch, triton, pytest or
``gemswatch.gems``.
"""

from __future__ import annotations

import argparse
from typing import Callable

from .ab import cmd_ab
from .new_candidate import cmd_new
from .pipeline import cmd_run, cmd_watch
from .profile import cmd_profile
from .reports import cmd_history, cmd_list
from .show import cmd_show

__all__ = ["COMMANDS", "cmd_ab", "cmd_history", "cmd_list", "cmd_new", "cmd_profile", "cmd_run", "cmd_show", "cmd_watch"]

# command word -> its handler
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "watch": cmd_watch,
    "run": cmd_run,
    "list": cmd_list,
    "history": cmd_history,
    "show": cmd_show,
    "ab": cmd_ab,
    "profile": cmd_profile,
    "new": cmd_new,
}
