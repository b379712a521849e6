"""``gemswatch profile FILE [--case-id ID]``: profile one benchmark case.

The case is ``--case-id`` or else the worst case of the file's last
benchmark (from the history); :func:`gemswatch.watch.profiling.profile_case`
replays it under ncu or the torch profiler. Prints the report's path and
three lines (kernels, time, achieved bandwidth); ``--json`` prints them as
one object. Exit 0 when a profile was taken, 1 when the replay failed, 2
for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from .file_arg import find_file, mapped
from .output import print_error
from .session_setup import install_stop_signals, load_project_config

__all__ = ["cmd_profile"]


def cmd_profile(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..profiling import NoCase, choose_case, profile_case

    path = find_file(cfg, args.file)
    if path is None:
        print_error(f"gemswatch profile: {args.file} not found (from here, {cfg.project} or {cfg.watch})")
        return 2
    cand = mapped(cfg, path)
    if cand is None:
        print_error(f"gemswatch profile: {cfg.rel(path)} is not mapped in {cfg.path.name}: add it under `candidates:`")
        return 2
    try:
        cand, choice = choose_case(cfg, cand, args.case_id)
    except NoCase as e:
        print_error(f"gemswatch profile: {e}")
        return 2
    stop = threading.Event()
    restore = install_stop_signals(stop)
    try:
        if not args.json:
            print_error(f"gemswatch profile: replaying {choice.case_id}" + (f" ({choice.label})" if choice.label else "")
                        + f" of {cand.rel}")
        result = profile_case(cfg, cand, choice, cancel=stop)
    finally:
        restore()
    if args.json:
        sys.stdout.write(json.dumps({
            "ok": result.ok, "tool": result.tool, "case_id": result.case_id, "run_dir": str(result.run_dir),
            "report": str(result.report) if result.report else None, "log": str(result.log),
            "summary": result.lines, "message": result.message, "note": result.note,
        }) + "\n")
        return 0 if result.ok else 1
    if result.note:
        print_error(f"gemswatch profile: {result.note}")
    if not result.ok:
        print_error(f"gemswatch profile: {result.message}; log: {result.log}")
        return 1
    print(f"{result.tool} report: {result.report}")
    for line in result.lines:
        print(f"  {line}")
    return 0
