"""``gemswatch show FILE``: the per-case table of a file's last benchmark.

Read from the history file alone (no stage runs): the latest benchmark of
the candidate FILE names, its cases worst first with their latency,
speedup, share of the roofline and change since the previous passing
benchmark; ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..events import format_speedup, headline
from ..stage.result import PER_CASE_ROWS
from .output import make_console, print_error
from .session_setup import load_project_config

__all__ = ["cmd_show"]


def cmd_show(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..case_table import candidates_named, case_rows, last_benchmark, render_case_table
    from ..history import History

    hist = History(cfg.state_dir)
    records = list(hist.records())
    names = candidates_named(records, args.file)
    if not names:
        print_error(f"gemswatch show: nothing in {hist.path} is about {args.file!r}: give a candidate's path, "
                    "name or stem (`gemswatch history` lists them)")
        return 2
    if len(names) > 1:
        print_error(f"gemswatch show: {args.file!r} names {len(names)} candidates ({', '.join(names)}); give its path")
        return 2
    pick = last_benchmark(records, names[0])
    if pick is None:
        print_error(f"gemswatch show: {names[0]} has no benchmark in {hist.path} yet: run "
                    f"`gemswatch run {names[0]} --benchmark auto` (or press b in the dashboard)")
        return 2
    rec = pick.record
    rows = case_rows(pick)
    if args.json:
        out = {
            "candidate": pick.candidate,
            "run_id": rec.get("run_id"),
            "time": rec.get("time"),
            "content_sha256": rec.get("content_sha256"),
            "status": rec.get("status"),
            "message": rec.get("message"),
            "speedup": rec.get("speedup"),
            "headline_speedup": rec.get("headline_speedup"),
            "headline_vs": rec.get("headline_vs"),
            "caveat": rec.get("caveat"),
            "previous_run_id": pick.previous.get("run_id") if pick.previous else None,
            "report": rec.get("report"),
            "cases": rows,
        }
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        return 0
    console = make_console()
    speedup, vs = headline(rec)
    head = (f"{pick.candidate} {str(rec.get('content_sha256', ''))[:8]}: benchmark {rec.get('status')} "
            f"at {str(rec.get('time', ''))[:19].replace('T', ' ')}"
            + (f", geomean {format_speedup(speedup)} against {vs}"
               if isinstance(speedup, (int, float)) and speedup > 0 else ""))
    console.print(head, markup=False, soft_wrap=True)
    for note in dict.fromkeys(n for n in (rec.get("caveat"), rec.get("message")) if n):
        console.print(f"  {note}", markup=False, soft_wrap=True)
    if pick.newer_runs:
        console.print(f"  {len(pick.newer_runs)} later save(s) ran no benchmark; this is the latest one that did",
                      style="yellow")
    if not rows:
        console.print("no timed case of the candidate in this benchmark" + (f": see {rec['log']}" if rec.get("log") else ""))
        return 0
    prev = pick.previous
    since = (f"change since {str(prev.get('time', ''))[:19].replace('T', ' ')} ({str(prev.get('content_sha256', ''))[:8]})"
             if prev else "no earlier passing benchmark to compare with")
    console.print(render_case_table(rows, title=f"cases, worst first (speedup against {vs}); {since}"))
    if len(rows) >= PER_CASE_ROWS and rec.get("report"):
        # a history line keeps a benchmark's worst cases only
        console.print(f"the {len(rows)} worst cases; every case is in {rec['report']}", style="dim")
    return 0
