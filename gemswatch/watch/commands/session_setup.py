"""The set-up every command shares: config, session, signals.

:func:`load_project_config` reads ``config.yaml`` (or ``--config``) and
turns a missing or invalid file into exit code 2 with the reasons on
stderr; :func:`open_session` builds the :class:`~gemswatch.watch.session.Session`
for a command and wires its output, warm-start state line and candidate
rows to the dashboard state; :func:`install_stop_signals` makes Ctrl-C,
SIGTERM and a hang-up stop the command (a second one kills the stages).
"""

from __future__ import annotations

import argparse
import hashlib
import signal
import threading
from pathlib import Path
from typing import Callable

import yaml

from ..config import Config, ConfigError, ConfigIssue, load_config
from ..events import EventBus, JsonSink
from .backend import open_backend
from .output import Output, print_error

__all__ = ["install_stop_signals", "load_project_config", "open_session"]


def find_config(start: Path) -> Path | None:
    """The nearest gemswatch config.yaml in ``start`` or a folder above it
    (as git and pytest find theirs): one with a top-level ``candidates:`` or
    ``operators:`` key, so another tool's config.yaml is passed over."""
    for folder in (start, *start.parents):
        path = folder / "config.yaml"
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.startswith(("candidates:", "operators:")) for line in text.splitlines()):
            return path
    return None


def load_project_config(args: argparse.Namespace, watch_override: Path | None = None) -> Config | int:
    """The config, or the exit code (2) when there is none or it is invalid."""
    if args.config:
        path = Path(args.config)
    else:
        found = find_config(Path.cwd())
        path = found if found is not None else Path("config.yaml")
        if found is not None and found.parent != Path.cwd():
            print_error(f"gemswatch: using {found} (the nearest config.yaml above this folder)")
    if not path.exists():
        print_error(
            f"gemswatch: {path} not found here or in any folder above: run gemswatch in a project with a "
            "config.yaml, or pass --config PATH (see docs/watch.md)"
        )
        return 2
    try:
        cfg = load_config(path, watch_override)
    except ConfigError as e:
        if getattr(args, "json", False):
            JsonSink()(
                {
                    "event": "config_error",
                    "config": str(path),
                    "errors": [i.to_dict() for i in e.issues],
                    "errors_text": [str(i) for i in e.issues],
                    "kept_last_good": False,
                }
            )
        issues = list(e.issues)
        if watch_override is not None and (line := wrong_folder(issues, watch_override, path)):
            print_error(line)
            issues = [i for i in issues if "matches no file in" not in i.problem]
        for issue in issues:
            print_error(str(issue))
        return 2
    warnings = list(cfg.warnings)
    if watch_override is not None and (line := wrong_folder(warnings, watch_override, path, len(cfg.candidates))):
        print_error(line)
        warnings = [w for w in warnings if "matches no file in" not in w.problem]
    for w in warnings:
        print_error(f"warning: {w}")
    return cfg


def wrong_folder(issues: list[ConfigIssue], folder: Path, config: Path, rules: int | None = None) -> str | None:
    """One line for a watched folder where every one of the ``rules``
    `candidates:` globs (default: counted in ``config``) misses: the folder
    is wrong, not every name. Else None."""
    misses = [i for i in issues if "matches no file in" in i.problem]
    if rules is None:
        try:
            rules = len((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("candidates") or {})
        except (OSError, yaml.YAMLError, AttributeError):
            return None
    if not misses or len(misses) != rules:
        return None
    globs = ", ".join(i.key.split(".", 1)[1] for i in misses)
    return (f"gemswatch: {folder} holds no candidate: no file there matches a `candidates:` glob of {config.name} "
            f"({globs}); give the folder your candidates are in, or no folder to watch the one {config.name} names")


def install_stop_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP set ``stop``; a second one kills the stages at once.
    Returns the function that puts the old handlers back."""
    from ..stage.supervise import kill_all

    hits = {"n": 0}

    def handler(signum, frame):
        hits["n"] += 1
        stop.set()
        if hits["n"] >= 2:
            kill_all(0)

    # SIGHUP too: closing the terminal must not leave stages running
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    old = {sig: signal.signal(sig, handler) for sig in sigs}

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def open_session(args: argparse.Namespace, cfg: Config, watch_override: Path | None, only: list[str] | None = None):
    """(session, bus, output, device) for a command, or exit code 2 when its
    stages have nowhere to run (:func:`~.backend.open_backend`); ``only``
    limits the dashboard rows to those candidates."""
    from ..session import Session

    backend = open_backend(args, cfg)
    if isinstance(backend, int):
        return backend
    device = backend.device
    bus = EventBus()
    session = Session(
        cfg,
        device,
        bus,
        jobs=args.jobs,
        benchmark=args.benchmark,
        watch_override=watch_override,
        warm=False if getattr(args, "cold", False) else None,
        spares=False if getattr(args, "no_spares", False) else None,
        seed=getattr(args, "seed", None),
        executor=backend.executor,
    )
    if backend.close is not None:
        session.closers.append(backend.close)
    out = Output(args, bus, cfg, device, session.jobs, session.policy)
    session.notify = out.note
    state = out.state
    if session.warm is not None:

        def show_warm(text: str) -> None:
            with state.lock:
                state.warm = text
                state.version += 1

        session.warm.listeners.append(show_warm)
        show_warm(session.warm.state)

    def refresh_rows() -> None:
        with state.lock:
            state.set_candidates([(c.rel, c.ops) for c in session.candidates() if only is None or c.rel in only])

    refresh_rows()
    session.listeners.append(refresh_rows)
    with state.lock:
        state.load_history(
            session.last_stage_records(),  # read from the history file when the session started
            {c.rel: _sha256(c.path) or "" for c in session.candidates()},
        )
    return session, bus, out, device
