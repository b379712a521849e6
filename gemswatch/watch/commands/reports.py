"""The read-only commands: ``gemswatch list`` and ``gemswatch history``.

:func:`cmd_list` shows the config in effect, each candidate with the
operators and functions it maps to, what each stage selects (with ``-v``
the exact stage commands) and the unmapped files; :func:`cmd_history`
prints past results per save and a per-operator leaderboard (``--json``:
the history records themselves), or with ``--svg``/``--png`` writes an
operator's speedup plot (:mod:`gemswatch.watch.history_plot`). Neither
runs a stage.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..events import JsonSink
from ..status import STAGES
from .output import make_console, print_error
from .session_setup import load_project_config

__all__ = ["cmd_history", "cmd_list"]


def cmd_list(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..mapping import CandidateMap, discover_files, selection_for
    from ..stage.plan import stage_command
    from ..session import pipeline_stages

    console = make_console()
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
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..history import History
    from ..history_tables import history_tables, matches_target, saves

    hist = History(cfg.state_dir)
    records = list(hist.records())
    if records and args.target and not any(matches_target(r, args.target) for r in records):
        print_error(f"gemswatch history: nothing in {hist.path} is about {args.target!r}: give a candidate's "
                    "path, name or stem, or an operator (`gemswatch list` shows them)")
        return 2
    if args.svg or args.png:
        return _plot(records, args.target, args.svg, args.png, hist.path)
    if args.json:
        # The latest --limit saves' records, oldest first, as the table shows them.
        latest = saves(records, args.target)[-args.limit:]
        keep = {r["run_id"] for r in latest} | {r["benchmark_run_id"] for r in latest if r.get("benchmark_run_id")}
        try:
            for r in records:
                if matches_target(r, args.target) and r.get("run_id") in keep:
                    JsonSink()(r)
        except BrokenPipeError:  # `gemswatch history --json | head`
            _quiet_stdout()
        return 0
    console = make_console()
    if not records:
        console.print(f"no history yet in {hist.path}: run `gemswatch` or `gemswatch run` first")
        return 0
    current = _current_environment(cfg)
    for t in history_tables(records, args.target, args.limit, current_env=current, runs_dir=hist.runs):
        console.print(t)
    console.print(f"env: blank = this environment (torch {current['torch']}, triton {current['triton']}, "
                  f"{current['device']}, driver {current['driver']}); other = measured with another; "
                  "? = a line without tags", style="dim", markup=False, soft_wrap=True)
    return 0


def _current_environment(cfg) -> dict:
    """The ``env`` tags results measured now would carry."""
    from ..devices import detect_devices
    from ..environment import EnvironmentTags

    device = detect_devices()
    gpu = device.gpus[0] if device.kind == "cuda" and device.gpus else None
    return EnvironmentTags(cfg.project, cfg.python, gpu, cfg.watch).tags()


def _plot(records: list[dict], target: str | None, svg: str | None, png: str | None, source: Path) -> int:
    from ..history_plot import plot_data, render_svg

    ops = sorted({op for r in records for op in r.get("operators") or []})
    if target not in ops:
        print_error(f"gemswatch history: a plot is of one operator; give one of {', '.join(ops) or '(none yet)'}"
                    f" (got {target!r})")
        return 2
    data = plot_data(records, target)
    text = render_svg(data)
    if svg:
        Path(svg).write_text(text, encoding="utf-8")
        print(f"{svg}: {len(data.series)} candidate(s), {data.saves} benchmarked save(s) of {target} from {source}")
        return 0
    return _write_png(text, Path(png))


def _write_png(svg_text: str, png: Path) -> int:
    """PNG through an installed SVG converter; gemswatch draws SVG only."""
    import shutil
    import subprocess
    import tempfile

    tools = [("rsvg-convert", ["-o", str(png)]), ("cairosvg", ["-o", str(png)])]
    found = [(shutil.which(name), opts) for name, opts in tools if shutil.which(name)]
    if not found:
        print_error("gemswatch history: no SVG-to-PNG converter here; write --svg FILE and convert it "
                    "(`rsvg-convert -o plot.png plot.svg` from librsvg2-bin, or `pip install cairosvg`)")
        return 2
    exe, opts = found[0]
    with tempfile.NamedTemporaryFile("w", suffix=".svg", encoding="utf-8") as f:
        f.write(svg_text)
        f.flush()
        done = subprocess.run([exe, f.name, *opts], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        print_error(f"gemswatch history: {exe} could not convert the plot: {done.stderr.strip()[:300]}")
        return 1
    print(png)
    return 0


def _quiet_stdout() -> None:
    """After the reader of stdout left: point it at /dev/null, so the
    interpreter's own flush at exit does not report the broken pipe."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
