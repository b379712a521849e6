"""What the commands print, and where.

:class:`Output` wires the chosen output (one JSON event per line, one plain
line per stage, or the live dashboard) to a session's event bus and keeps
the dashboard state that feeds the summary and ``--svg`` in every mode;
:func:`show_until_stopped` draws (or just waits) until the command is done,
and :func:`print_summary` prints the end-of-command summary. Error lines go
to stderr through :func:`print_error`.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

from ..config import Config
from ..devices import DeviceInfo
from ..events import EventBus, JsonSink, PlainSink, format_headline
from ..status import STAGES

__all__ = ["Output", "make_console", "output_mode", "print_error", "print_summary", "show_until_stopped"]


def print_error(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def output_mode(args: argparse.Namespace) -> str:
    """``json``, ``plain`` (asked for, or stdout is not a terminal) or ``dashboard``."""
    if args.json:
        return "json"
    if args.plain or not sys.stdout.isatty():
        return "plain"
    return "dashboard"


def make_console():
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(highlight=False)
    # off a terminal rich assumes 80 columns; tables of paths need more
    return Console(highlight=False, width=int(os.environ.get("COLUMNS", "160")))


class Output:
    """Wires the chosen output (json / plain / dashboard) to the event bus.

    The dashboard state is kept in every mode: it feeds the summary and
    ``--svg``; only the dashboard mode draws it live.
    """

    def __init__(self, args: argparse.Namespace, bus: EventBus, cfg: Config, device: DeviceInfo, jobs: int, policy: str):
        from ..dashboard import DashboardState, LiveView

        self.mode = output_mode(args)
        self.args = args
        self.console = make_console()
        self.state = DashboardState(
            watch=cfg.rel(cfg.watch) + "/",
            project=str(cfg.project),
            device=device.describe(),
            jobs=jobs,
            benchmark=policy,
        )
        self.view = LiveView(self.state, self.console)
        bus.subscribe(self.view.sink)
        if self.mode == "json":
            bus.subscribe(JsonSink(sys.stdout))
            self.note = lambda text: print_error(f"gemswatch: {text}")
        elif self.mode == "plain":
            self.plain = PlainSink(sys.stdout, verbose=args.verbose)
            bus.subscribe(self.plain)
            self.note = lambda text: self.plain.note(f"note: {text}")
        else:
            self.note = self.view.note

    def write_svg(self) -> None:
        path = getattr(self.args, "svg", None)
        if not path:
            return
        from rich.console import Console

        from ..dashboard import render

        # tall enough that the failure pane is not shrunk to a terminal's rows
        rec = Console(record=True, width=120, height=60, file=open(os.devnull, "w"), force_terminal=True,
                      color_system="truecolor")
        with self.state.lock:
            self.state.now = 0.0
            rec.print(render(self.state))
        Path(path).write_text(rec.export_svg(title="gemswatch"), encoding="utf-8")


def show_until_stopped(out: Output, stop: threading.Event, poll: float) -> None:
    """Draw the dashboard (or, in json/plain mode, just wait) until ``stop`` is set."""
    if out.mode == "dashboard":
        out.view.run(stop)
    else:
        while not stop.wait(poll):
            pass


def print_summary(out: Output, session, only: list[str] | None = None) -> None:
    """Write ``--svg``, then the summary: a table (dashboard) or one line per candidate (plain)."""
    out.write_svg()
    if out.mode == "dashboard":
        from ..dashboard import render_summary

        with out.state.lock:
            out.console.print(render_summary(out.state))
    elif out.mode == "plain":
        for item in session.summary(only):
            stages = " ".join(f"{s}={item['stages'].get(s, '-')}" for s in STAGES)
            sp = f" speedup={format_headline(item['speedup'], item.get('speedup_vs', 'eager'))}" if item.get("speedup") else ""
            msg = f" - {item['message']}" if item.get("message") else ""
            out.plain.note(f"summary {item['candidate']}: {item['status'] or 'not run'} ({stages}){sp}{msg}")
