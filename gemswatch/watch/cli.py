"""The ``gemswatch`` command line.

    gemswatch [DIR]            watch DIR (default: `watch:` in config.yaml)
    gemswatch run [FILE...]    run the pipeline once; exit 0 passed, 1 failed, 2 usage/config
    gemswatch list             candidates, operators and the exact stage commands (-v)
    gemswatch history [FILE|OP]
    gemswatch new OP [NAME]

This module and everything it imports stay free of torch, triton,
gemswatch.gems and the candidates: those load only in stage processes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from .config import Config, ConfigError, load_config
from .devices import DeviceInfo, detect_devices
from .events import EventBus, JsonSink, PlainSink, format_speedup
from .status import ALL_SKIPPED, PASSED, STAGES

__all__ = ["main"]

COMMANDS = ("watch", "run", "list", "history", "new")
_VALUE_OPTS = {"--config", "--benchmark", "--jobs", "--limit", "--svg"}

EXAMPLES = """\
examples:
  gemswatch candidates/                 watch a folder; every save re-runs its pipeline
  gemswatch --benchmark auto            also benchmark each save that passes
  gemswatch run                         run every mapped candidate once (CI); exit 0/1/2
  gemswatch run candidates/softmax_v2.py --json
  gemswatch list -v                     show the exact pytest command of each stage
  gemswatch history softmax             past results and a speedup leaderboard
  gemswatch new rms_norm rms_norm_v3    start a candidate from the current gems kernel
  gemswatch --config ../FlagGems/config.yaml   drive another checkout
  gemswatch --cold                      start every stage as a fresh interpreter (no warm pool)

dashboard keys: r rerun all, f rerun failed, b benchmark now, up/down select, q quit
"""


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common options")
    g.add_argument("--config", metavar="PATH", default=None, help="config file (default: ./config.yaml)")
    g.add_argument(
        "--benchmark",
        choices=("never", "manual", "auto"),
        default=None,
        help="benchmark policy (default: config's `benchmark:`); manual runs it on `b`",
    )
    g.add_argument("--jobs", type=_positive_int, metavar="N", default=None, help="stages at once (default: CPUs on CPU, GPUs on CUDA)")
    g.add_argument(
        "--cold",
        action="store_true",
        help="start every stage as a fresh interpreter (no warm pool; default: config's `warm:`)",
    )
    out = g.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON event per line on stdout")
    out.add_argument("--plain", action="store_true", help="one line per finished stage (default off a terminal)")
    g.add_argument("--poll", action="store_true", help="polling observer (network or container file systems)")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail: commands, logs")
    g.add_argument("--svg", metavar="PATH", default=None, help="on exit, write the dashboard as an SVG picture")


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


# command -> (prog, description, whether --help shows the examples)
_HELP = {
    "watch": (
        "gemswatch",
        "Watch candidate kernels and turn every save into a verdict: preflight, correctness, benchmark.\n"
        "Commands: gemswatch [DIR] | run [FILE...] | list | history [FILE|OP] | new OP [NAME]",
        True,
    ),
    "run": (
        "gemswatch run",
        "Run the pipeline once for FILEs (default: every mapped candidate) and exit:\n"
        "0 all passed, 1 a stage did not pass, 2 usage or config error.",
        True,
    ),
    "list": ("gemswatch list", "Show each candidate, the operators and functions it maps to, and what each stage runs.", False),
    "history": ("gemswatch history", "Past results per save, and a per-operator leaderboard of passing variants.", False),
    "new": ("gemswatch new", "Write a new candidate for OP from the current gems kernel and map it in config.yaml.", False),
}


def _parser(cmd: str) -> argparse.ArgumentParser:
    prog, description, examples = _HELP[cmd]
    p = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=EXAMPLES if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if cmd == "watch":
        p.add_argument("dir", nargs="?", metavar="DIR", help="folder to watch (default: `watch:` in config.yaml)")
        p.add_argument("--no-initial", action="store_true", help="do not run every candidate at start")
    elif cmd == "run":
        p.add_argument("files", nargs="*", metavar="FILE")
        p.add_argument("--allow-skipped", action="store_true", help="count an all-skipped correctness as passing")
    elif cmd == "history":
        p.add_argument("target", nargs="?", metavar="FILE|OP")
        p.add_argument("--limit", type=_positive_int, default=30, help="latest N saves (default 30)")
    elif cmd == "new":
        p.add_argument("op", metavar="OP")
        p.add_argument("name", nargs="?", metavar="NAME", help="file name without .py (default: OP_vN)")
    _common(p)
    return p


def _split_command(argv: list[str]) -> tuple[str, list[str]]:
    """('run', rest) for `gemswatch --json run x.py`; ('watch', argv) when no command is named."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            break
        if a.startswith("-"):
            if a in _VALUE_OPTS:
                i += 2
                continue
            i += 1
            continue
        if a in COMMANDS:
            return a, argv[:i] + argv[i + 1 :]
        break
    return "watch", argv


# ---------------------------------------------------------------------------
# shared set-up


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _load(args: argparse.Namespace, watch_override: Path | None = None) -> Config | int:
    path = Path(args.config) if args.config else Path("config.yaml")
    if not path.exists():
        _err(
            f"gemswatch: {path} not found: run gemswatch in a project with a config.yaml, "
            "or pass --config PATH (see docs/watch.md)"
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
        for issue in e.issues:
            _err(str(issue))
        return 2
    for w in cfg.warnings:
        _err(f"warning: {w}")
    return cfg


def _mode(args: argparse.Namespace) -> str:
    if args.json:
        return "json"
    if args.plain or not sys.stdout.isatty():
        return "plain"
    return "dashboard"


def _console():
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(highlight=False)
    # off a terminal rich assumes 80 columns; tables of paths need more
    return Console(highlight=False, width=int(os.environ.get("COLUMNS", "160")))


class _Output:
    """Wires the chosen output (json / plain / dashboard) to the event bus.

    The dashboard state is kept in every mode: it feeds the summary and
    ``--svg``; only the dashboard mode draws it live.
    """

    def __init__(self, args: argparse.Namespace, bus: EventBus, cfg: Config, device: DeviceInfo, jobs: int, policy: str):
        from .dashboard import DashboardState, LiveView

        self.mode = _mode(args)
        self.args = args
        self.console = _console()
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
            self.note = lambda text: _err(f"gemswatch: {text}")
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

        from .dashboard import render

        rec = Console(record=True, width=120, file=open(os.devnull, "w"), force_terminal=True, color_system="truecolor")
        with self.state.lock:
            self.state.now = 0.0
            rec.print(render(self.state))
        Path(path).write_text(rec.export_svg(title="gemswatch"), encoding="utf-8")


def _show_until(out: _Output, stop: threading.Event, poll: float) -> None:
    """Draw the dashboard (or, in json/plain mode, just wait) until ``stop`` is set."""
    if out.mode == "dashboard":
        out.view.run(stop)
    else:
        while not stop.wait(poll):
            pass


def _install_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP set ``stop``; a second one kills the stages at once."""
    from .stage.supervise import kill_all

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


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _session(args: argparse.Namespace, cfg: Config, watch_override: Path | None, only: list[str] | None = None):
    from .session import Session

    device = detect_devices()
    bus = EventBus()
    session = Session(
        cfg,
        device,
        bus,
        jobs=args.jobs,
        benchmark=args.benchmark,
        watch_override=watch_override,
        warm=False if getattr(args, "cold", False) else None,
    )
    out = _Output(args, bus, cfg, device, session.jobs, session.policy)
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
            {c.rel: _sha(c.path) or "" for c in session.candidates()},
        )
    return session, bus, out, device


def _print_summary(out: _Output, session, only: list[str] | None = None) -> None:
    out.write_svg()
    if out.mode == "dashboard":
        from .dashboard import render_summary

        with out.state.lock:
            out.console.print(render_summary(out.state))
    elif out.mode == "plain":
        for item in session.summary(only):
            stages = " ".join(f"{s}={item['stages'].get(s, '-')}" for s in STAGES)
            sp = f" speedup={format_speedup(item['speedup'])}" if item.get("speedup") else ""
            msg = f" - {item['message']}" if item.get("message") else ""
            out.plain.note(f"summary {item['candidate']}: {item['status'] or 'not run'} ({stages}){sp}{msg}")


# ---------------------------------------------------------------------------
# commands


def cmd_watch(args: argparse.Namespace) -> int:
    from .filters import PythonFilter
    from .keys import KeyReader
    from .watcher import Command, FileWatcher, watch_loop

    watch_override = Path(args.dir) if args.dir else None
    cfg = _load(args, watch_override)
    if isinstance(cfg, int):
        return cfg
    session, bus, out, device = _session(args, cfg, watch_override)
    stop = threading.Event()
    restore_signals = _install_signals(stop)
    inbox: queue.Queue[Any] = queue.Queue()
    watcher = FileWatcher(inbox, keep=PythonFilter(extra_files=frozenset({cfg.path.name})), poll=args.poll)

    def on_command(cmd: Command) -> None:
        name, key = cmd
        if name != "key":
            return
        if key in ("q", "ctrl-c"):
            stop.set()
        elif key == "r":
            session.run_all("rerun all", force=True)
        elif key == "f":
            session.rerun_failed()
        elif key == "b":
            with out.state.lock:
                sel = out.state.selected_candidate()
            session.benchmark_now([sel] if sel else None)
        elif key in ("up", "down", "k", "j"):
            with out.state.lock:
                out.state.select(-1 if key in ("up", "k") else 1)

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
    loop.start()
    try:
        _show_until(out, stop, 0.5)
    finally:
        stop.set()
        if keys is not None:
            keys.stop()
        loop.join(timeout=10)
        session.stop()
        restore_signals()
    bus.emit("watch_stopped", summary=session.summary())
    _print_summary(out, session)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if isinstance(cfg, int):
        return cfg
    from .mapping import CandidateMap

    cmap = CandidateMap(cfg)
    if args.files:
        targets = []
        for f in args.files:
            p = Path(f).absolute().resolve()
            if not p.is_file():
                _err(f"gemswatch run: {f} does not exist")
                return 2
            c = cmap.lookup(p)
            if c is None:
                _err(f"gemswatch run: {f} is not mapped: add it to {cfg.path.name} under `candidates:` (watched folder {cfg.rel(cfg.watch)}/)")
                return 2
            targets.append(c)
    else:
        targets = cmap.candidates()
        if not targets:
            _err(f"gemswatch run: no mapped candidate exists in {cfg.watch}: add files under `candidates:` in {cfg.path.name}")
            return 2
    session, bus, out, device = _session(args, cfg, None, only=[c.rel for c in targets])
    out.state.footer = "gemswatch run: every file once, then exit · Ctrl-C stops"
    stop = threading.Event()
    restore_signals = _install_signals(stop)
    runs = [session.trigger(c.path, "run", force=True) for c in targets]
    waiter_done = threading.Event()

    def waiter() -> None:
        session.scheduler.wait_idle(stop=stop)
        waiter_done.set()
        stop.set()

    t = threading.Thread(target=waiter, name="gemswatch-wait", daemon=True)
    t.start()
    try:
        _show_until(out, stop, 0.2)
    finally:
        interrupted = not waiter_done.is_set()
        session.stop()
        restore_signals()
    _print_summary(out, session, [c.rel for c in targets])
    if interrupted:
        _err("gemswatch run: interrupted")
        return 130
    statuses = []
    for r in runs:
        if r is None:
            statuses.append("error")
            continue
        rec = session.last_runs.get(r.candidate.rel) or {}
        statuses.append(rec.get("status", "error"))
    ok = {PASSED} | ({ALL_SKIPPED} if args.allow_skipped else set())
    if all(s in ok for s in statuses):
        return 0
    if out.mode != "json" and ALL_SKIPPED in statuses and not args.allow_skipped:
        _err("gemswatch run: a correctness stage had every case skipped (use --allow-skipped to accept that)")
    return 1


def cmd_list(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if isinstance(cfg, int):
        return cfg
    from .mapping import CandidateMap, discover_files, selection_for
    from .stage.plan import stage_command
    from .session import pipeline_stages

    console = _console()
    cmap = CandidateMap(cfg)
    policy = args.benchmark or cfg.benchmark
    if args.cold or not cfg.warm:
        start = "cold (every stage a fresh interpreter: " + ("--cold)" if args.cold else f"warm: false in {cfg.path.name})")
    else:
        start = "warm (forked from a pool that preloads " + (", ".join(cfg.preload) or "nothing") + ")"
    console.print(
        f"config {cfg.path}\nproject {cfg.project}\nwatching {cfg.watch}\n"
        f"python {cfg.python}\nbenchmark {policy} (level {cfg.level}); a save runs: {' -> '.join(pipeline_stages(policy))}\n"
        f"stages start {start}",
        soft_wrap=True,
        markup=False,
    )
    cands = cmap.candidates()

    for c in cands:
        console.print(f"\n[bold]{c.rel}[/bold]", soft_wrap=True)
        for op, fn in c.operators:
            console.print(f"  {op} -> {fn}", soft_wrap=True, markup=False)
        tests = shlex.join(selection_for(cfg, c.ops, "tests").args) or "(none)"
        bench = shlex.join(selection_for(cfg, c.ops, "benchmark").args) or "(none)"
        console.print(f"  correctness: {tests}", soft_wrap=True, markup=False)
        console.print(f"  preflight, benchmark: {bench} (level {cfg.level})", soft_wrap=True, markup=False)
        if args.verbose:
            console.print("  commands (each run passes a snapshot of the file in place of its path):", soft_wrap=True)
            for stage in STAGES:
                out = Path(".gemswatch/runs/<run_id>") / f"{stage}.json"
                cmd = stage_command(cfg, c, stage, c.path, out)
                console.print(f"    {stage}: " + (shlex.join(cmd) if cmd else "(nothing to run)"), soft_wrap=True, markup=False)
    if not cands:
        console.print(f"no mapped candidate exists in {cfg.watch}")
    mapped = {str(c.path) for c in cands}
    unmapped = [f for f in discover_files(cfg.watch) if str(f) not in mapped and not f.name.startswith("_")]
    for f in unmapped:
        console.print(f"\n[yellow]unmapped[/yellow] {cfg.rel(f)}: add it under `candidates:` to run it", soft_wrap=True)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if isinstance(cfg, int):
        return cfg
    from .history import STATE_DIR, History
    from .history_tables import history_tables, matches_target

    hist = History(cfg.project / STATE_DIR)
    records = list(hist.records())
    if args.json:
        for r in records:
            if matches_target(r, args.target):
                JsonSink()(r)
        return 0
    console = _console()
    if not records:
        console.print(f"no history yet in {hist.path}: run `gemswatch` or `gemswatch run` first")
        return 0
    for t in history_tables(records, args.target, args.limit):
        console.print(t)
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if isinstance(cfg, int):
        return cfg
    from .scaffold import NewCandidateError, add_mapping, find_kernel_source, make_candidate_source

    op = args.op
    if not op.isidentifier():
        _err(f"gemswatch new: {op!r} is not an operator name")
        return 2
    if op not in cfg.operators or not cfg.operators[op].tests:
        _err(f"gemswatch new: {cfg.path.name} has no tests for {op!r}: add `operators: {{{op}: {{tests: ...}}}}` first")
        return 2
    if args.name:
        name = args.name[:-3] if args.name.endswith(".py") else args.name
    else:
        n = 2
        while (cfg.watch / f"{op}_v{n}.py").exists():
            n += 1
        name = f"{op}_v{n}"
    if not name.replace("-", "_").replace(".", "_").isidentifier() or "/" in name:
        _err(f"gemswatch new: {name!r} is not a usable file name (letters, digits, _)")
        return 2
    target = cfg.watch / f"{name}.py"
    if target.exists():
        _err(f"gemswatch new: {cfg.rel(target)} already exists: pick another NAME")
        return 2
    func = f"my_{op}"
    try:
        src_file, package = find_kernel_source(op)
        text = make_candidate_source(src_file.read_text(encoding="utf-8"), package, op, func, f"{package}.{src_file.stem}")
    except NewCandidateError as e:
        _err(f"gemswatch new: {e}")
        return 2
    old_config = cfg.path.read_text(encoding="utf-8")
    target.write_text(text, encoding="utf-8")
    rel_glob = target.relative_to(cfg.watch).as_posix()
    try:
        add_mapping(cfg.path, rel_glob, op, func)
        load_config(cfg.path)
    except (NewCandidateError, ConfigError) as e:
        cfg.path.write_text(old_config, encoding="utf-8")
        target.unlink()
        _err(f"gemswatch new: could not map the new file, nothing changed: {e}")
        return 2
    print(f"wrote {cfg.rel(target)} ({op} -> {func}, from {src_file.name}) and mapped it in {cfg.path.name}")
    print(f"next: edit it and watch with `gemswatch {cfg.rel(cfg.watch)}/`, or check it once with `gemswatch run {cfg.rel(target)}`")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gemswatch`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd, rest = _split_command(argv)
    args = _parser(cmd).parse_args(rest)
    handler = {"watch": cmd_watch, "run": cmd_run, "list": cmd_list, "history": cmd_history, "new": cmd_new}[cmd]
    return handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
