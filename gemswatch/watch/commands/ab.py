"""``gemswatch ab A.py B.py``: two candidates of one operator, timed side by side.

Each round runs the operator's benchmark stage once for A and once for B,
each a stage process of its own (forked from the warm pool unless
``--cold``), A first in odd rounds and B first in even ones (ABBA order:
a drift of the machine over time falls on both sides alike). Both sides
time the same cases on the same inputs: a case's inputs are built from a
seed derived from its id. The rounds' latencies go to
:func:`gemswatch.watch.ab_stats.compare_rounds`; the table shows per case
the ratio B/A, its 95 % interval and whether the difference is
significant. Everything a round ran stays in one folder under
``.gemswatch/runs/`` (``A-1/benchmark.log`` ...). Exit 0 when every round
passed, 1 when a stage did not, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

from ..config import Config
from ..mapping import Candidate
from .file_arg import find_file, mapped
from .output import make_console, print_error
from .session_setup import install_stop_signals, load_project_config

__all__ = ["cmd_ab", "pair_candidates"]


def _parse_op(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    op, _, func = text.partition(":")
    return op, func or None


def pair_candidates(cfg: Config, a_text: str, b_text: str, op_text: str | None) -> tuple[Candidate, Candidate] | str:
    """A and B as candidates of one operator, or the error line.

    A mapped file brings its operators and functions; an unmapped one takes
    the other side's (or ``--op OP:FUNC``'s) function name. ``--op`` picks
    the operator when a file maps several."""
    want_op, want_func = _parse_op(op_text)
    sides: list[tuple[Path, Candidate | None]] = []
    for text in (a_text, b_text):
        path = find_file(cfg, text)
        if path is None:
            return f"gemswatch ab: {text} not found (from here, {cfg.project} or {cfg.watch})"
        sides.append((path, mapped(cfg, path)))
    pairs = [dict(c.operators) if c else {} for _, c in sides]
    ops = set(pairs[0]) & set(pairs[1]) if all(pairs) else set(pairs[0] or pairs[1])
    if want_op is not None:
        if ops and want_op not in ops:
            return f"gemswatch ab: --op {want_op}: the files map {', '.join(sorted(ops)) or 'no operator in common'}"
        op = want_op
    elif len(ops) == 1:
        op = next(iter(ops))
    elif not ops:
        return ("gemswatch ab: the two files share no mapped operator: map them under `candidates:` in "
                f"{cfg.path.name}, or give --op OP:FUNC")
    else:
        return f"gemswatch ab: the files map {', '.join(sorted(ops))}; pick one with --op OP"
    if op not in cfg.operators:
        return f"gemswatch ab: operator {op!r} is not under `operators:` in {cfg.path.name}"
    out = []
    for (path, cand), mine, other in ((sides[0], pairs[0], pairs[1]), (sides[1], pairs[1], pairs[0])):
        func = want_func or mine.get(op) or other.get(op)
        if func is None:
            return f"gemswatch ab: no function is known for {op} in {cfg.rel(path)}: give --op {op}:FUNC"
        out.append(Candidate(path, cand.rel if cand else cfg.rel(path), ((op, func),), cand.pattern if cand else ""))
    return out[0], out[1]


def _benchmark_once(stages, cfg: Config, cand: Candidate, source: bytes, sha: str, folder: Path, run_id: str,
                    extra: list[str], device: str | None, stop: threading.Event):
    from ..stage.run import start_run

    folder.mkdir()
    run = start_run(folder, run_id=run_id, candidate=cand, source=source, sha256=sha, stages=["benchmark"],
                    config=cfg, reason="ab", fingerprint="", seq=0)
    run.cancel = stop
    plan = stages.plan(run, "benchmark", device)
    cmd = list(plan.command)
    at = cmd.index("--record")
    return stages.execute(run, replace(plan, command=tuple(cmd[:at] + extra + cmd[at:])))


def cmd_ab(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..ab_stats import compare_rounds
    from ..devices import detect_devices
    from ..history import History, new_run_id
    from ..stage.executor import ProcessExecutor, WarmForkExecutor
    from ..stage.plan import base_env, selection_kind
    from ..mapping import selection_for
    from ..stage.run import Stages
    from ..stage.warm import WarmStarter

    pair = pair_candidates(cfg, args.a, args.b, args.op)
    if isinstance(pair, str):
        print_error(pair)
        return 2
    a, b = pair
    op = a.ops[0]
    if not selection_for(cfg, [op], selection_kind("benchmark")):
        print_error(f"gemswatch ab: {op} has no `benchmark:` selection in {cfg.path.name}; add one")
        return 2
    sources = {"A": a.path.read_bytes(), "B": b.path.read_bytes()}  # both rounds time these bytes
    shas = {k: hashlib.sha256(v).hexdigest() for k, v in sources.items()}
    cands = {"A": a, "B": b}
    extra: list[str] = []
    for cid in args.case_id or []:
        extra += ["--case-id", cid]
    if args.warmup is not None:
        extra += ["--warmup", f"{args.warmup:g}"]
    if args.iter is not None:
        extra += ["--iter", f"{args.iter:g}"]

    starter = None
    if args.cold or not cfg.warm:
        executor = ProcessExecutor()
    else:
        starter = WarmStarter(log_path=cfg.state_dir / "warm.log")
        starter.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=base_env(cfg))
        executor = WarmForkExecutor(starter)
    stages = Stages(executor)
    history = History(cfg.state_dir)
    ab_id = new_run_id(f"ab-{op}", shas["A"][:4] + shas["B"][:4])
    root = history.run_dir(ab_id)
    device = detect_devices().slots[0]
    latencies: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    labels: dict[str, str] = {}
    stop = threading.Event()
    restore = install_stop_signals(stop)
    try:
        for r in range(1, args.rounds + 1):
            for side in ("A", "B") if r % 2 else ("B", "A"):
                res = _benchmark_once(stages, cfg, cands[side], sources[side], shas[side], root / f"{side}-{r}",
                                      f"{ab_id}-{side}{r}", extra, device, stop)
                if stop.is_set():
                    print_error("gemswatch ab: stopped")
                    return 1
                if res.status != "passed":
                    print_error(f"gemswatch ab: {side} ({cands[side].rel}) round {r}: benchmark {res.status.upper()}"
                                f" - {res.message}; log: {res.log}")
                    return 1
                latencies[side].append({c["case"]: c["latency_ms"] for c in res.per_case
                                        if isinstance(c.get("latency_ms"), (int, float))})
                labels.update({c["case"]: c.get("label") or c["case"] for c in res.per_case})
                print_error(f"gemswatch ab: round {r}/{args.rounds} {side} done ({res.duration_s:.1f}s)")
    finally:
        restore()
        if starter is not None:
            starter.shutdown()
    rows = compare_rounds(latencies["A"], latencies["B"], labels)
    if args.json:
        sys.stdout.write(json.dumps({"operator": op, "a": a.rel, "b": b.rel, "a_sha256": shas["A"],
                                     "b_sha256": shas["B"], "rounds": args.rounds, "folder": str(root),
                                     "cases": [c.to_dict() for c in rows]}) + "\n")
        return 0
    _print_table(rows, {"A": f"{a.rel} {shas['A'][:8]}", "B": f"{b.rel} {shas['B'][:8]}"}, op, args.rounds, root)
    return 0


def _print_table(rows, sides: dict[str, str], op: str, rounds: int, root: Path) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ..case_table import format_ms

    console = make_console()
    for side, name in sides.items():
        console.print(f"{side}: {name}", markup=False, soft_wrap=True)
    t = Table(box=box.SIMPLE, pad_edge=False, title_justify="left",
              title=f"{op}: latency B/A per case over {rounds} rounds (above 1: B slower)")
    for name in ("case", "A", "B", "B/A", "95% interval", "verdict"):
        t.add_column(name, justify="left" if name in ("case", "verdict") else "right", overflow="fold")
    for c in rows:
        interval = f"{c.low:.3f} - {c.high:.3f}" if c.low is not None else ""
        style = "red" if c.verdict == "B slower" else "green" if c.verdict == "B faster" else "dim"
        t.add_row(Text(c.label), format_ms(c.a_ms), format_ms(c.b_ms), f"{c.ratio:.3f}", interval, f"[{style}]{c.verdict}[/]")
    console.print(t)
    differ = sum(c.significant for c in rows)
    console.print(f"{differ} of {len(rows)} case(s) differ significantly (95 %); runs in {root}", markup=False,
                  soft_wrap=True)
