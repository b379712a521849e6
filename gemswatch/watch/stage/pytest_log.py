"""Reading a pytest log: the one line worth showing.

A stage's verdict comes from its exit code and report; the log only supplies
the words (a usage error's reason, the first failing line). Pure functions
over the log's text.
"""

from __future__ import annotations

import re
import signal
from typing import Any

__all__ = ["PROTOCOL_OPTIONS", "SESSION_NOTE", "first_failure_line", "first_line", "missing_protocol", "signal_name",
           "usage_error"]

# The options a checkout's pytest must know for gemswatch to drive it.
PROTOCOL_OPTIONS = ("--override", "--record", "--output", "--level", "--preflight-only")


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
# The lines the isolated session writes around the tests: how the candidate's
# worker is sandboxed, where its calls and the session spent their time.
# Never a reason.
SESSION_NOTE = re.compile(r"^gemswatch: (candidate (sandbox|calls)|stage clock, s after configure): ")


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


def missing_protocol(log_tail: str) -> list[str]:
    """The override protocol's options that pytest's usage error calls
    unrecognized (a checkout that predates the protocol), in protocol order."""
    for ln in _log_lines(log_tail):
        if "unrecognized arguments:" in ln:
            given = {t.split("=", 1)[0] for t in ln.split("unrecognized arguments:", 1)[1].split() if t.startswith("--")}
            return [o for o in PROTOCOL_OPTIONS if o in given]
    return []


def _last_meaningful(lines: list[str]) -> str:
    for ln in reversed(lines):
        s = ln.strip()
        if s and not set(s) <= set("=-_ ") and not s.startswith("no tests ran") and not SESSION_NOTE.match(s):
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
