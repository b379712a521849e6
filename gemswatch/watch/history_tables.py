"""Tables for ``gemswatch history``: results per save and a leaderboard.

Given the current environment (:mod:`.environment`), both mark the rows
measured in another one (``other``: torch, triton, driver or device
differ) or in an unknown one (``?``: a line written before lines were
tagged), so like is compared with like.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from .dashboard import STATUS_STYLE
from .environment import same_environment
from .events import format_speedup, headline
from .status import STAGES

__all__ = ["matches_target", "saves", "leaderboard", "history_tables", "environment_mark"]


def matches_target(rec: dict[str, Any], target: str | None) -> bool:
    """True when a history record is about ``target`` (a candidate's path,
    name or stem, or one of its operators); no target matches every record."""
    if not target:
        return True
    cand = str(rec.get("candidate", ""))
    if target in (cand, Path(cand).name, Path(cand).stem) or cand.endswith("/" + target.lstrip("./")):
        return True
    return target in (rec.get("operators") or [])


def saves(records: list[dict[str, Any]], target: str | None = None) -> list[dict[str, Any]]:
    """One entry per run (a save), oldest first, with its stage records."""
    runs: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("event") not in ("stage_finished", "run_finished") or not matches_target(rec, target):
            continue
        rid = str(rec.get("run_id"))
        run = runs.setdefault(
            rid,
            {
                "run_id": rid,
                "candidate": rec.get("candidate"),
                "sha": rec.get("content_sha256", ""),
                "operators": rec.get("operators") or [],
                "time": rec.get("time", ""),
                "stages": {},
                "status": None,
                "speedup": None,
                "speedups": {},
                "env": None,
            },
        )
        if isinstance(rec.get("env"), dict):
            run["env"] = rec["env"]
        if rec["event"] == "stage_finished":
            run["stages"][rec.get("stage")] = rec
            if rec.get("stage") == "benchmark" and rec.get("status") == "passed":
                run["speedup"], run["speedup_vs"] = headline(rec)
                run["speedups"] = {op: r for op in run["operators"] if (r := headline(rec, op)[0]) is not None}
        else:
            run["status"] = rec.get("status")
    out = _benchmarks_joined(sorted(runs.values(), key=lambda r: str(r["time"])))
    prev: dict[str, float] = {}
    for r in out:
        if r["speedup"] is not None:
            before = prev.get(str(r["candidate"]))
            r["change"] = None if not before else r["speedup"] / before - 1
            prev[str(r["candidate"])] = r["speedup"]
        else:
            r["change"] = None
    return out


def _benchmarks_joined(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run that only benchmarked (``b`` on a file) joins the row of the
    save it measured: the candidate's latest earlier run of the same bytes."""
    kept: list[dict[str, Any]] = []
    latest: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        key = (r["candidate"], r["sha"])
        save = latest.get(key)
        if set(r["stages"]) == {"benchmark"} and save is not None:
            save["stages"]["benchmark"] = r["stages"]["benchmark"]
            for k in ("speedup", "speedup_vs", "speedups", "env"):
                if r.get(k) is not None:
                    save[k] = r[k]
            save["benchmark_run_id"] = r["run_id"]
            continue
        latest[key] = r
        kept.append(r)
    return kept


def stopped(run: dict[str, Any]) -> bool:
    """A run that reached no verdict: stopped by quitting or a newer save."""
    return all((rec or {}).get("status") in ("superseded", "not_run") for rec in run["stages"].values())


def leaderboard(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """operator -> passing variants (candidate, content) best speedup first.

    A variant counts when its correctness passed and its benchmark passed,
    for the same bytes; each (candidate, sha) appears once, at its best.
    """
    passed_sha = {
        (r["candidate"], r["sha"])
        for r in runs
        if (r["stages"].get("correctness") or {}).get("status") == "passed"
    }
    board: dict[str, dict[tuple, dict[str, Any]]] = {}
    for r in runs:
        if r["speedup"] is None or (r["candidate"], r["sha"]) not in passed_sha:
            continue
        for op in r["operators"]:
            sp = r["speedups"].get(op, r["speedup"])
            key = (r["candidate"], r["sha"])
            cur = board.setdefault(op, {}).get(key)
            if cur is None or sp > cur["speedup"]:
                board[op][key] = {"candidate": r["candidate"], "sha": r["sha"], "speedup": sp, "time": r["time"],
                                  "env": r.get("env"), "run_id": r["run_id"]}
    return {op: sorted(v.values(), key=lambda e: -e["speedup"]) for op, v in sorted(board.items())}


def environment_mark(env: Any, current: dict[str, Any] | None) -> Text:
    """'' for a row of the current environment, 'other' for another, '?' for an untagged one."""
    same = same_environment(env, current)
    if same is None:
        return Text("?", style="dim")
    if same:
        return Text("")
    differs = [k for k in ("torch", "triton", "driver", "device") if env.get(k) != current.get(k)]
    return Text("other: " + ", ".join(f"{k} {env.get(k)}" for k in differs), style="yellow")


def history_tables(records: list[dict[str, Any]], target: str | None, limit: int = 30,
                   current_env: dict[str, Any] | None = None, runs_dir: Path | None = None) -> list[RenderableType]:
    """The saves table and the leaderboard; with ``current_env``, an ``env``
    column marks rows of another environment; with ``runs_dir`` (the run
    folders), the leaderboard says where each operator's best code is kept."""
    everything = saves(records, target)
    runs = [r for r in everything if not stopped(r)]
    marked = current_env is not None
    t = Table(box=box.SIMPLE, title=f"saves{f' of {target}' if target else ''} (latest {limit})", title_justify="left")
    t.add_column("time", no_wrap=True)
    t.add_column("candidate")
    t.add_column("sha256", no_wrap=True)
    for s in STAGES:
        t.add_column(s)
    t.add_column("speedup")
    t.add_column("change")
    if marked:
        t.add_column("env")
    for r in runs[-limit:]:
        cells = []
        for s in STAGES:
            st = (r["stages"].get(s) or {}).get("status")
            cells.append(Text(st or "-", style=STATUS_STYLE.get(st or "", "dim")))
        change = r.get("change")
        t.add_row(
            str(r["time"])[:19].replace("T", " "),
            str(r["candidate"]),
            str(r["sha"])[:12],
            *cells,
            format_speedup(r['speedup']) if r["speedup"] is not None else "-",
            Text(f"{change * 100:+.1f}%", style="green" if change > 0 else "red") if change is not None else Text("-", style="dim"),
            *([environment_mark(r.get("env"), current_env)] if marked else []),
        )
    hidden = len(everything) - len(runs)
    if hidden:
        t.caption = f"{hidden} run(s) stopped before any verdict (quit, or a newer save) not shown"
    out: list[RenderableType] = [t]
    board = leaderboard(runs)
    if board:
        lb = Table(box=box.SIMPLE, title="leaderboard: passing variants by speedup", title_justify="left")
        lb.add_column("operator")
        lb.add_column("#")
        lb.add_column("candidate")
        lb.add_column("sha256")
        lb.add_column("speedup")
        lb.add_column("time")
        if marked:
            lb.add_column("env")
        for op, entries in board.items():
            for i, e in enumerate(entries[:5], 1):
                lb.add_row(op if i == 1 else "", str(i), str(e["candidate"]), str(e["sha"])[:12], format_speedup(e['speedup']), str(e["time"])[:19].replace("T", " "),
                           *([environment_mark(e.get("env"), current_env)] if marked else []))
        out.append(lb)
        if runs_dir is not None:
            for op, entries in board.items():
                best = entries[0]
                snap = runs_dir / str(best["run_id"]) / "snapshot" / Path(str(best["candidate"])).name
                out.append(Text(f"best {op}: {snap}", style="dim"))
    else:
        out.append(Text("leaderboard: no variant has passed correctness and a benchmark yet (press b, or --benchmark auto)", style="dim"))
    return out
