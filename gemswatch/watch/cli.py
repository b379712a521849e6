"""The ``gemswatch`` command line: its arguments, and :func:`main`.

    gemswatch [watch] [DIR]    watch DIR (default: `watch:` in config.yaml)
    gemswatch run [FILE...]    run the pipeline once; exit 0 passed, 1 failed, 2 usage/config
    gemswatch list             candidates, operators and the exact stage commands (-v)
    gemswatch history [FILE|OP] [--svg FILE | --png FILE]
    gemswatch show FILE        the per-case table of a file's last benchmark
    gemswatch ab A.py B.py     two candidates of one operator, timed side by side
    gemswatch profile FILE     profile a file's worst benchmark case
    gemswatch new OP [NAME]

This module owns the parsing: which command a command line names (it may
come after common options), each command's parser and help text, and the
entry point of the ``gemswatch`` console script and ``python -m
gemswatch.watch``, which hands the parsed arguments to the command's
handler in :mod:`gemswatch.watch.commands`. This module and everything it
imports stay free of torch, triton, gemswatch.gems and the candidates:
those load only in stage processes.
"""

from __future__ import annotations

import argparse
import sys

from .commands import COMMANDS
from .stage import reaper as care

__all__ = ["main"]

_VALUE_OPTS = {"--config", "--benchmark", "--jobs", "--limit", "--svg", "--seed", "--executor", "--ray-address"}

EXAMPLES = """\
examples:
  gemswatch candidates/                 watch a folder; every save re-runs its pipeline
  gemswatch --benchmark auto            also benchmark each save that passes
  gemswatch run                         run every mapped candidate once (CI); exit 0/1/2
  gemswatch run candidates/softmax_v2.py --json
  gemswatch list -v                     show the exact pytest command of each stage
  gemswatch history softmax             past results and a speedup leaderboard
  gemswatch history softmax --svg s.svg speedup per save of each candidate, as a picture
  gemswatch show candidates/softmax_v2.py   the last benchmark's cases, worst first
  gemswatch ab candidates/softmax_v2.py candidates/softmax_v3.py --rounds 6
  gemswatch profile candidates/softmax_v2.py   ncu (or the torch profiler) on the worst case
  gemswatch new rms_norm rms_norm_v3    start a candidate from the current gems kernel
  gemswatch --config ../FlagGems/config.yaml   drive another checkout
  gemswatch --cold                      start every stage as a fresh interpreter (no warm pool)
  gemswatch --no-spares                 no spare stage processes on a GPU (the warm pool's forks instead)
  gemswatch run --executor ray          every stage a task on a Ray cluster (docs/scale-out.md)

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
        "--seed",
        type=_seed,
        metavar="N",
        default=None,
        help="seed of the correctness stages' randomly drawn cases (default: a fresh one per stage; "
        "a report and the dashboard name it, so --seed replays it)",
    )
    g.add_argument(
        "--cold",
        action="store_true",
        help="start every stage as a fresh interpreter (no warm pool; default: config's `warm:`)",
    )
    g.add_argument(
        "--no-spares",
        action="store_true",
        help="no spare stage processes started ahead of need (default: config's `spares:`, on for a GPU)",
    )
    g.add_argument(
        "--executor",
        choices=("local", "ray"),
        default=None,
        help="where stages run: local, or ray (a Ray cluster: docs/scale-out.md; default: config's `executor:`)",
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        default=None,
        help="with --executor ray: the cluster to join, auto or HOST:PORT "
        "(default: config's `ray_address:`, else a cluster of this machine started for the run)",
    )
    out = g.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON event per line on stdout")
    out.add_argument("--plain", action="store_true", help="one line per finished stage (default off a terminal)")
    g.add_argument("--poll", action="store_true", help="polling observer (network or container file systems)")
    g.add_argument("-v", "--verbose", action="store_true", help="more detail: commands, logs")
    g.add_argument("--svg", metavar="PATH", default=None, help="on exit, write the dashboard as an SVG picture")


def _config_and_json(p: argparse.ArgumentParser, json_help: str) -> None:
    """The two options every read-only or one-off command takes."""
    p.add_argument("--config", metavar="PATH", default=None, help="config file (default: the nearest config.yaml)")
    p.add_argument("--json", action="store_true", help=json_help)


def _rounds(text: str) -> int:
    n = _positive_int(text)
    if n < 2:
        raise argparse.ArgumentTypeError(f"at least 2 rounds give an interval, got {n}")
    return n


def _ms(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of milliseconds, got {v:g}")
    return v


def _seed(text: str) -> int:
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (the seed a report names), got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {n}")
    return n


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
        "Commands: gemswatch [watch] [DIR] | run [FILE...] | list | history [FILE|OP] | show FILE |\n"
        "ab A.py B.py | profile FILE | new OP [NAME]",
        True,
    ),
    "run": (
        "gemswatch run",
        "Run the pipeline once for FILEs (default: every mapped candidate) and exit:\n"
        "0 all passed, 1 a stage did not pass, 2 usage or config error.",
        True,
    ),
    "list": ("gemswatch list", "Show each candidate, the operators and functions it maps to, and what each stage runs.", False),
    "history": (
        "gemswatch history",
        "Past results per save, and a per-operator leaderboard of passing variants.\n"
        "With --svg (or --png) and an operator: a picture of each candidate's speedup per save and the\n"
        "per-case speedups of the best variant.",
        False,
    ),
    "show": (
        "gemswatch show",
        "The per-case table of FILE's last benchmark, from the history: each case's latency, the\n"
        "baselines', the speedup, the share of the roofline and the change since the previous passing\n"
        "benchmark, worst speedup first. Runs nothing.",
        False,
    ),
    "ab": (
        "gemswatch ab",
        "Time two candidates of one operator on the same cases and inputs: each round runs the benchmark\n"
        "stage once for A and once for B (each its own process; A first in odd rounds, B first in even\n"
        "ones), then prints per case the latency ratio B/A with a 95% interval over the rounds and\n"
        "whether the two differ significantly. Exit 0 done, 1 a stage did not pass, 2 usage error.",
        False,
    ),
    "profile": (
        "gemswatch profile",
        "Replay one benchmark case of FILE with --profile-only under a profiler: ncu where the stages run\n"
        "on a GPU and ncu works, else the torch profiler (on CPU its CPU activity). The report goes to a\n"
        "new run folder under .gemswatch/runs/; prints its path and a summary (kernels, time, bandwidth).\n"
        "Exit 0 profiled, 1 the replay failed, 2 usage error.",
        False,
    ),
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
        p.add_argument("files", nargs="*", metavar="FILE",
                       help="candidate files, or folders of them, to run (default: every mapped candidate)")
        p.add_argument("--allow-skipped", action="store_true", help="count an all-skipped correctness as passing")
    elif cmd == "history":
        p.add_argument("target", nargs="?", metavar="FILE|OP",
                       help="a candidate file (its saves) or an operator (its variants and leaderboard); default: all")
        p.add_argument("--limit", type=_positive_int, default=30, help="latest N saves (default 30)")
        plot = p.add_mutually_exclusive_group()
        plot.add_argument("--svg", metavar="FILE", default=None, help="write OP's speedup plot as an SVG picture")
        plot.add_argument("--png", metavar="FILE", default=None,
                          help="the same as PNG (converted from the SVG by rsvg-convert or cairosvg where installed)")
        _config_and_json(p, "the records as JSON lines")
        return p
    elif cmd == "show":
        p.add_argument("file", metavar="FILE", help="a candidate's path, name or stem")
        _config_and_json(p, "the table as one JSON object")
        return p
    elif cmd == "ab":
        p.add_argument("a", metavar="A.py")
        p.add_argument("b", metavar="B.py")
        p.add_argument("--rounds", type=_rounds, default=4, metavar="N",
                       help="rounds, each timing A and B once (default 4; at least 2 for an interval)")
        p.add_argument("--op", metavar="OP[:FUNC]", default=None,
                       help="the operator when the files map several, and the function of a file not mapped")
        p.add_argument("--case-id", action="append", default=None, metavar="ID",
                       help="time only this case (repeatable; ids: `gemswatch show FILE --json`)")
        p.add_argument("--warmup", type=_ms, default=None, metavar="MS", help="warmup per timed function (benchmark's default)")
        p.add_argument("--iter", type=_ms, default=None, metavar="MS", help="measuring time per timed function (benchmark's default)")
        p.add_argument("--cold", action="store_true", help="start every stage as a fresh interpreter (no warm pool)")
        _config_and_json(p, "the comparison as one JSON object")
        return p
    elif cmd == "profile":
        p.add_argument("file", metavar="FILE")
        p.add_argument("--case-id", default=None, metavar="ID",
                       help="the case to replay (default: the worst speedup of FILE's last benchmark)")
        _config_and_json(p, "the result as one JSON object")
        return p
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gemswatch`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd, rest = _split_command(argv)
    args = _parser(cmd).parse_args(rest)
    # What a stage abandons comes back to gemswatch when the stage dies first.
    care.adopt_orphans()
    return COMMANDS[cmd](args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
