"""The commands that run stages: ``gemswatch [DIR]`` and ``gemswatch run``.

:func:`cmd_watch` watches the candidates' folder and re-runs a file's
pipeline on every save (with the dashboard's keys: rerun, benchmark, quit)
until it is stopped; :func:`cmd_run` runs the pipeline once for the given
files (default: every mapped candidate) and exits 0 when all passed, 1 when
a stage did not pass, 2 on a usage or config error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
from pathlib import Path
from typing import Any

from ..status import ALL_SKIPPED, PASSED
from .output import print_error, print_summary, show_until_stopped
from .session_setup import install_stop_signals, load_project_config, open_session

__all__ = ["cmd_run", "cmd_watch"]


def cmd_watch(args: argparse.Namespace) -> int:
    from ..dashboard import handle_key
    from ..filters import PythonFilter
    from ..keys import KeyReader
    from ..watcher import Command, FileWatcher, watch_loop
    from .dashboard_keys import WatchActions

    watch_override = Path(args.dir) if args.dir else None
    cfg = load_project_config(args, watch_override)
    if isinstance(cfg, int):
        return cfg
    opened = open_session(args, cfg, watch_override)
    if isinstance(opened, int):
        return opened
    session, bus, out, device = opened
    stop = threading.Event()
    restore_signals = install_stop_signals(stop)
    inbox: queue.Queue[Any] = queue.Queue()
    watcher = FileWatcher(inbox, keep=PythonFilter(extra_files=frozenset({cfg.path.name})), poll=args.poll)

    actions = WatchActions(session, out, stop)

    def on_command(cmd: Command) -> None:
        name, key = cmd
        if name == "key":
            handle_key(key, out.state, actions)

    bus.emit(
        "watch_started",
        watch=str(session.config.watch),
        project=str(session.config.project),
        config=str(session.config.path),
        device=device.describe(),
        jobs=session.jobs,
        benchmark=session.policy,
        candidates=[{"candidate": c.rel, "operators": dict(c.operators)} for c in session.candidates()],
        pid=os.getpid(),
        warm=session.warm is not None and session.warm.active,
    )
    loop = threading.Thread(
        target=watch_loop,
        args=(session, watcher, inbox, stop),
        kwargs={"on_command": on_command, "on_error": out.note, "initial": not args.no_initial},
        name="gemswatch-loop",
        daemon=True,
    )
    keys = None
    if out.mode != "json" and sys.stdin.isatty():
        keys = KeyReader(lambda k: inbox.put(Command("key", k)))
        if not keys.start():
            keys = None
        actions.keys = keys  # a pager borrows the terminal from it
    loop.start()
    try:
        show_until_stopped(out, stop, 0.5)
    finally:
        stop.set()
        if keys is not None:
            keys.stop()
        loop.join(timeout=10)
        session.stop()
        restore_signals()
    bus.emit("watch_stopped", summary=session.summary())
    print_summary(out, session)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..mapping import CandidateMap

    cmap = CandidateMap(cfg)
    if args.files:
        targets = []
        for f in args.files:
            # A symlinked candidate is known by its own name in the watched
            # folder (as `list`, a plain `run` and the watcher know it).
            given = Path(f).absolute()
            p = given.parent.resolve() / given.name
            if p.is_dir():  # every mapped candidate in it
                inside = [c for c in cmap.candidates() if c.path.is_relative_to(p.resolve())]
                if not inside:
                    print_error(f"gemswatch run: {f} holds no mapped candidate: give candidate files, or a folder "
                                f"with files matching `candidates:` in {cfg.path.name} (watched folder {cfg.rel(cfg.watch)}/)")
                    return 2
                targets += [c for c in inside if c not in targets]
                continue
            if not p.is_file():
                print_error(f"gemswatch run: {f} does not exist")
                return 2
            c = cmap.lookup(p)
            if c is None:
                print_error(f"gemswatch run: {f} is not mapped: add it to {cfg.path.name} under `candidates:` (watched folder {cfg.rel(cfg.watch)}/)")
                return 2
            targets.append(c)
    else:
        targets = cmap.candidates()
        if not targets:
            print_error(f"gemswatch run: no mapped candidate exists in {cfg.watch}: add files under `candidates:` in {cfg.path.name}")
            return 2
    opened = open_session(args, cfg, None, only=[c.rel for c in targets])
    if isinstance(opened, int):
        return opened
    session, bus, out, device = opened
    out.state.footer = "gemswatch run: every file once, then exit · Ctrl-C stops"
    stop = threading.Event()
    restore_signals = install_stop_signals(stop)
    runs = [session.trigger(c.path, "run", force=True) for c in targets]
    waiter_done = threading.Event()

    def waiter() -> None:
        session.scheduler.wait_idle(stop=stop)
        waiter_done.set()
        stop.set()

    t = threading.Thread(target=waiter, name="gemswatch-wait", daemon=True)
    t.start()
    try:
        show_until_stopped(out, stop, 0.2)
    finally:
        interrupted = not waiter_done.is_set()
        session.stop()
        restore_signals()
    print_summary(out, session, [c.rel for c in targets])
    if interrupted:
        print_error("gemswatch run: interrupted")
        return 130
    statuses = []
    for r in runs:
        if r is None:
            statuses.append("error")
            continue
        rec = session.last_runs.get(r.candidate.rel) or {}
        statuses.append(rec.get("status", "error"))
    ok = {PASSED} | ({ALL_SKIPPED} if args.allow_skipped else set())
    if session.history_error:
        print_error(f"gemswatch run: {session.history_error}")
        return 1  # the verdicts were shown, but not kept
    if all(s in ok for s in statuses):
        return 0
    if out.mode != "json" and ALL_SKIPPED in statuses and not args.allow_skipped:
        print_error("gemswatch run: a correctness stage had every case skipped (use --allow-skipped to accept that)")
    return 1
