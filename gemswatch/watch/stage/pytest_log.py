"""Reading a pytest log: the one line worth showing.

A stage's verdict comes from its exit code and report; the log only supplies
the words (a usage error's reason, the first failing line). Pure functions
over the log's text.
"""

from __future__ import annotations

import re
import signal
from typing import Any

__all__ = ["first_failure_line", "first_line", "signal_name", "usage_error"]


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def first_line(text: Any, limit: int = 240) -> str:
    if text is None:
        return ""
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _log_lines(log_tail: str) -> list[str]:
    return [_ANSI.sub("", ln).rstrip() for ln in (log_tail or "").splitlines()]


def usage_error(log_tail: str) -> str:
    """The one-line reason pytest printed for a usage error (exit 4)."""
    lines = _log_lines(log_tail)
    for ln in lines:
        s = ln.strip()
        if s.startswith("ERROR:") and len(s) > 6:
            return s[6:].strip()
    # conftest import failures print "ImportError while loading conftest" and
    # the exception on an "E   " line.
    for ln in lines:
        s = ln.strip()
        if s.startswith("E ") and s[1:].strip():
            return s[1:].strip()
    return _last_meaningful(lines)


def _last_meaningful(lines: list[str]) -> str:
    for ln in reversed(lines):
        s = ln.strip()
        if s and not set(s) <= set("=-_ ") and not s.startswith("no tests ran"):
            return first_line(s)
    return ""


def first_failure_line(log_tail: str) -> str:
    """The first 'E ...' or 'FAILED ...' line of a pytest log."""
    lines = _log_lines(log_tail)
    for ln in lines:
        s = ln.strip()
        if s.startswith("FAILED ") or s.startswith("ERROR "):
            return first_line(s)
    for ln in lines:
        s = ln.strip()
        if s.startswith("E ") and s[1:].strip():
            return first_line(s[1:])
    return _last_meaningful(lines)
