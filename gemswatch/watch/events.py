"""The event stream: one dict per thing that happened, fanned out to sinks.

Event names and the fields of ``stage_finished`` are a contract (docs/watch.md):
``--json`` prints each event as one line; the history file, the plain
printer and the dashboard all consume the same events.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
import threading
from typing import Any, Callable, Mapping, TextIO

__all__ = [
    "EVENTS",
    "format_headline",
    "format_speedup",
    "headline",
    "EventBus",
    "JsonSink",
    "PlainSink",
    "format_plain",
    "now_iso",
]

EVENTS = (
    "watch_started",
    "run_queued",
    "stage_started",
    "stage_finished",
    "run_finished",
    "config_error",
    "config_reloaded",
    "watch_stopped",
)

Sink = Callable[[dict[str, Any]], None]


def format_speedup(value: float) -> str:
    """1.32x, 12.4x, 0.00123x: three significant digits, however small."""
    return f"{value:.3g}x" if value < 1 else f"{value:.2f}x" if value < 100 else f"{value:.0f}x"


def headline(record: Mapping[str, Any], op: str | None = None) -> tuple[float | None, str]:
    """The ratio a benchmark record, or one of its ``per_case`` rows, is
    judged by, and its baseline: against the best of torch eager and
    torch.compile on a GPU, against the interpreted gems kernel under the CPU
    interpreter (``headline_speedup``, the record's geomean or the row's own,
    or ``headline_speedups[op]`` for one operator); ``speedup`` against eager
    where there is no headline."""
    h = (record.get("headline_speedups") or {}).get(op) if op else record.get("headline_speedup")
    if _ratio(h):
        return float(h), str(record.get("headline_vs") or "best")
    s = (record.get("speedups") or {}).get(op, record.get("speedup")) if op else record.get("speedup")
    return (float(s), "eager") if _ratio(s) else (None, "eager")


def format_headline(value: float, vs: str) -> str:
    """``1.46x vs gems``; the eager baseline needs no name where no other is measured."""
    return format_speedup(value) + ("" if vs == "eager" else f" vs {vs}")


def _ratio(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def now_iso() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="milliseconds")


class EventBus:
    """Deliver each event to every sink, in order, one event at a time.

    Sinks run in registration order; register the history writer first so a
    finished stage is on disk before anyone shows it.
    """

    def __init__(self) -> None:
        self._sinks: list[Sink] = []
        self._failed: set = set()
        self._lock = threading.RLock()

    def subscribe(self, sink: Sink) -> None:
        with self._lock:
            self._sinks.append(sink)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}")
        record = {"event": event, "time": now_iso(), **fields}
        with self._lock:
            for sink in list(self._sinks):
                try:
                    sink(record)
                except Exception as e:  # a broken sink (closed pipe, full disk) must not stop the loop
                    if sink not in self._failed:
                        self._failed.add(sink)
                        try:
                            sys.stderr.write(f"gemswatch: an event sink failed: {type(e).__name__}: {e}\n")
                        except Exception:
                            pass
        return record


class JsonSink:
    """One JSON object per line on a stream (stdout for ``--json``)."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout

    def __call__(self, record: dict[str, Any]) -> None:
        self.stream.write(json.dumps(record, default=str) + "\n")
        self.stream.flush()


def _cases_text(cases: dict[str, int] | None) -> str:
    if not cases or not cases.get("total"):
        return ""
    parts = [f"{cases.get('passed', 0)} passed"]
    if cases.get("failed"):
        parts.append(f"{cases['failed']} failed")
    if cases.get("skipped"):
        parts.append(f"{cases['skipped']} skipped")
    return ", ".join(parts)


def format_plain(record: dict[str, Any], verbose: bool = False) -> str | None:
    """The plain-text line for an event, or None when plain mode shows nothing."""
    ev = record.get("event")
    t = str(record.get("time", ""))[11:19]
    if ev == "stage_finished":
        calls = sum((record.get("candidate_calls") or {}).values())
        bits = [
            f"{t} {record.get('candidate', '?')}",
            f"{record.get('stage', '?')}:",
            str(record.get("status", "?")).upper(),
        ]
        detail = []
        ct = _cases_text(record.get("cases"))
        if ct:
            detail.append(ct)
        if calls:
            detail.append(f"{calls} calls")
        ratio, vs = headline(record)
        if ratio is not None:
            s = format_headline(ratio, vs)
            prev = record.get("speedup_prev")
            if prev:
                s += f" ({(ratio / prev - 1) * 100:+.0f}%)"
            detail.append(s)
        if record.get("duration_s") is not None and record.get("status") != "not_run":
            detail.append(f"{record['duration_s']:.1f}s")
        if record.get("seed") is not None:
            detail.append(f"seed {record['seed']}")
        line = " ".join(bits)
        if detail:
            line += " (" + ", ".join(detail) + ")"
        if record.get("message") and (record.get("status") != "passed" or verbose):
            line += f" - {record['message']}"
        if verbose and record.get("status") not in ("passed", "not_run") and record.get("log"):
            line += f"\n    log: {record['log']}"
        return line
    if ev == "run_finished" and verbose:
        return f"{t} {record.get('candidate')} run {record.get('run_id')}: {record.get('status')}"
    if ev == "stage_started" and verbose:
        return f"{t} {record.get('candidate')} {record.get('stage')}: started\n    $ {record.get('command_line', '')}"
    if ev == "run_queued" and verbose:
        return f"{t} {record.get('candidate')} queued ({record.get('reason', '')}) sha256 {str(record.get('content_sha256', ''))[:12]}"
    if ev == "config_error":
        lines = [f"{t} config error (keeping the last good config):" if record.get("kept_last_good") else f"{t} config error:"]
        lines += [f"    {e}" for e in record.get("errors_text", [])]
        return "\n".join(lines)
    if ev == "watch_started":
        return (
            f"{t} watching {record.get('watch')} (project {record.get('project')}, "
            f"{record.get('device')}, jobs {record.get('jobs')}, benchmark {record.get('benchmark')})"
        )
    if ev == "watch_stopped":
        return f"{t} stopped"
    return None


class PlainSink:
    """One line per finished stage (and config errors), for logs and CI."""

    def __init__(self, stream: TextIO | None = None, verbose: bool = False):
        self.stream = stream or sys.stdout
        self.verbose = verbose

    def __call__(self, record: dict[str, Any]) -> None:
        line = format_plain(record, self.verbose)
        if line is not None:
            self.stream.write(line + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
