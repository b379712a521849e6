"""Does a 0.2 % scale error confined to one size class fail correctness?

    python scripts/scale_error_sweep.py [--ops softmax,mm] [--dtype bfloat16] [--factor 1.002] [--jobs 1] [--seed N] [--keep DIR]

For each operator and each size class of its relevant size (elements for
pointwise ops, the reduced width for reductions and row ops, each of M, N
and K for the matrix products) it writes a torch-backed candidate that is
right everywhere except that its result is ``factor`` times too large where
the input's size falls in that class (scripts/_scaled_candidate.py), plus
one honest control per operator (with ``--dtype``, the error is only in
results of that dtype: the dtypes a class is blind in). All of them are
judged by one `gemswatch run --json` (correctness only: the scratch config has no
benchmark selections, so no preflight) in a scratch project whose
``project:`` is this checkout, each selection stopping at its first failing
case (-x). It prints the kill matrix (operator x size class) and exits 1
when a scaled candidate survives or a control fails.

Integer results are left as torch computes them: a 0.2 % scale cannot show
in integers, so the matrix is about floating results.

Run it under ``nice``; on the 2-core CPU machine all 14 operators take a
while under Triton's interpreter (docs/testing.md gives the measured time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "mutants"))

from _scaled_candidate import AXES  # noqa: E402

from gemswatch.testing.cases import SIZE_CLASSES  # noqa: E402

CONTROL = "control"


@dataclass(frozen=True)
class Entry:
    """One generated candidate: ``op`` scaled by ``factor`` where its
    ``axis`` size is in ``size_class`` (the control: nowhere)."""

    op: str
    axis: str
    size_class: str

    @property
    def column(self) -> str:
        return CONTROL if self.size_class == CONTROL else f"{self.axis} {self.size_class}" if self.axis in "MNK" else self.size_class

    @property
    def file_name(self) -> str:
        if self.size_class == CONTROL:
            return f"{self.op}__control.py"
        return f"{self.op}__{self.axis}_{self.size_class}.py"


def entries(ops: list[str]) -> list[Entry]:
    """Every scaled candidate of ``ops`` and one control each."""
    found = []
    for op in ops:
        found.append(Entry(op, AXES[op][0], CONTROL))
        found += [Entry(op, axis, name) for axis in AXES[op] for name in SIZE_CLASSES]
    return found


def candidate_text(entry: Entry, factor: float, dtype: str | None = None) -> str:
    if entry.size_class == CONTROL:
        lo, hi, factor, dtype, what = 1, 0, 1.0, None, "computed honestly everywhere (the control)"
    else:
        lo, hi = SIZE_CLASSES[entry.size_class]
        what = f"{factor:g} times too large where its {entry.axis} size is in {entry.size_class} ({lo}-{hi})"
        what += f", in {dtype} results only" if dtype else ""
    return (
        f'"""{entry.op}, {what}."""\n\n'
        "from _scaled_candidate import scaled\n\n"
        f"{entry.op} = scaled({entry.op!r}, {entry.axis!r}, {lo}, {hi}, {factor!r}, {dtype!r})\n"
    )


def build_project(root: Path, chosen: list[Entry], factor: float, dtype: str | None) -> Path:
    """A scratch project: the candidates, their two helper modules, and a
    config.yaml mapping each file to its operator, with this checkout's
    correctness selections (stopping at the first failure)."""
    folder = root / "candidates"
    folder.mkdir(parents=True)
    shutil.copyfile(ROOT / "scripts" / "_scaled_candidate.py", folder / "_scaled_candidate.py")
    shutil.copyfile(ROOT / "tests" / "mutants" / "_references.py", folder / "_references.py")
    for entry in chosen:
        (folder / entry.file_name).write_text(candidate_text(entry, factor, dtype))
    repo = yaml.safe_load((ROOT / "config.yaml").read_text())
    ops = sorted({e.op for e in chosen})
    tests = {op: repo["operators"][op]["tests"] for op in ops}
    config = {
        "watch": "candidates",
        "project": str(ROOT),
        "benchmark": "never",
        "timeouts": {"correctness": 1800},
        "candidates": {e.file_name: {e.op: e.op} for e in chosen},
        "operators": {op: {"tests": [*([t] if isinstance(t, str) else t), "-x"], "marker": op} for op, t in tests.items()},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def run(project: Path, jobs: int, seed: int | None) -> dict[str, dict]:
    """file name -> its correctness stage_finished event."""
    cmd = [sys.executable, "-m", "gemswatch.watch", "run", "--json", "--jobs", str(jobs)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    env = {**os.environ, "GEMSWATCH_DEVICE": os.environ.get("GEMSWATCH_DEVICE", "cpu"), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env)
    found = {}
    for line in result.stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "stage_finished" and event.get("stage") == "correctness":
            found[Path(event["candidate"]).name] = event
    if not found:
        sys.exit(f"scale_error_sweep: no correctness verdict (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return found


def _verdict(entry: Entry, event: dict | None) -> str:
    if event is None:
        return "no verdict"
    status = event["status"]
    if entry.size_class == CONTROL:
        return "passed" if status == "passed" else status.upper()
    return "killed" if status == "failed" else "SURVIVED" if status == "passed" else status.upper()


def report(chosen: list[Entry], verdicts: dict[str, dict]) -> bool:
    """Print the kill matrix and each survivor's or failed control's detail;
    True when every scaled candidate was killed and every control passed."""
    columns = [CONTROL] + list(dict.fromkeys(e.column for e in chosen if e.size_class != CONTROL))
    cells = {(e.op, e.column): _verdict(e, verdicts.get(e.file_name)) for e in chosen}
    ops = list(dict.fromkeys(e.op for e in chosen))
    print("| operator | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for op in ops:
        print(f"| {op} | " + " | ".join(cells.get((op, c), "") for c in columns) + " |")
    good = True
    for e in chosen:
        verdict = cells[(e.op, e.column)]
        if verdict in ("killed", "passed"):
            continue
        good = False
        event = verdicts.get(e.file_name) or {}
        print(f"\n{e.file_name}: {verdict}, seed {event.get('seed')}: {event.get('message') or ''}")
        if event.get("first_failure"):
            print(f"  first failure: {json.dumps(event['first_failure'])[:600]}")
    return good


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help=f"comma-separated operators (default: all {len(AXES)})")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16", "float64"], help="scale only results of this dtype")
    parser.add_argument("--factor", type=float, default=1.002, help="the scale of the error (default 1.002)")
    parser.add_argument("--jobs", type=int, default=1, help="stages at once (default 1)")
    parser.add_argument("--seed", type=int, help="seed of the drawn cases (default: fresh per stage)")
    parser.add_argument("--keep", type=Path, help="build the scratch project here and keep it (default: a temp folder)")
    args = parser.parse_args(argv)
    ops = args.ops.split(",") if args.ops else list(AXES)
    unknown = [op for op in ops if op not in AXES]
    if unknown:
        parser.error(f"unknown operators {unknown}; choose from {', '.join(AXES)}")
    chosen = entries(ops)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gemswatch-scale-sweep-") as tmp:
        root = args.keep or Path(tmp)
        if args.keep and root.exists():
            shutil.rmtree(root)
        verdicts = run(build_project(root, chosen, args.factor, args.dtype), args.jobs, args.seed)
    print(f"scale {args.factor:g}" + (f" in {args.dtype} results only" if args.dtype else " in every floating dtype") + "\n")
    good = report(chosen, verdicts)
    print(f"\n{len(chosen)} candidates, {time.monotonic() - start:.0f} s")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
