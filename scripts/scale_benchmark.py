"""Many candidates at once: local with one job, local with every slot, and a Ray cluster.

    python scripts/scale_benchmark.py [--variants N] [--benchmark] [--ray-address ADDR]
                                      [--modes jobs1,auto,cold,ray] [--keep]

Writes N honest softmax variants (plain torch, each a different but correct
formulation, each file's bytes its own) into a scratch project with the
repository's softmax tests and benchmark, then runs `gemswatch run --json`
over all of them once per mode, each in a fresh copy of the project:

  jobs1  local, --jobs 1 (the warm pool): the serial time;
  auto   local, --jobs auto (one job per core, or per GPU);
  cold   local, --jobs auto --cold: every stage a fresh interpreter, as on Ray;
  ray    --executor ray: a cluster of this machine started by the command
         (or the one at --ray-address), every stage a cold task of its own.

It prints each mode's wall time, its slots, the ideal (serial time / slots)
and the ratio to it, the Ray run's start-up (command start to its first
stage) and the ratio without it, the Ray run against the cold local one
(what the executor itself costs, the cold start aside), and the results
lost (a candidate without a verdict) or duplicated (a stage reported
twice): the goal is 0 and 0, with the same verdicts in every mode. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gemswatch.watch.devices import detect_devices  # noqa: E402

# Correct softmax formulations; the variants cycle through them.
FORMS = {
    "torch.softmax in float64": "torch.softmax(x64, dim)",
    "functional softmax in float64": "torch.nn.functional.softmax(x64, dim=dim)",
    "exp of log_softmax in float64": "torch.log_softmax(x64, dim).exp()",
}
VARIANT = '''"""Scale benchmark variant {index}: an honest softmax ({form})."""

import torch

VARIANT = {index}


def my_softmax(x, dim=-1, dtype=None):
    x64 = x.to(dtype or x.dtype).double()
    result = {expr}
    out = torch.empty_like(x, dtype=dtype or x.dtype)  # keeps the input's strides
    return out.copy_(result)
'''
PYTEST_INI = "[pytest]\naddopts = -p no:cacheprovider\nmarkers =\n    softmax: tests of softmax\n"
PROJECT_FILES = ("tests/conftest.py", "tests/test_softmax.py", "tests/_softmax_family.py",
                 "benchmark/conftest.py", "benchmark/test_softmax_perf.py")


def build_project(root: Path, variants: int, benchmark: bool) -> Path:
    for rel in PROJECT_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, root / rel)
    (root / "pytest.ini").write_text(PYTEST_INI)
    (root / "variants").mkdir()
    forms = list(FORMS.items())
    for i in range(variants):
        form, expr = forms[i % len(forms)]
        (root / "variants" / f"softmax_{i:03d}.py").write_text(VARIANT.format(index=i, form=form, expr=expr))
    config = {
        "watch": "variants",
        "benchmark": "auto" if benchmark else "never",
        "candidates": {"softmax_*.py": {"softmax": "my_softmax"}},
        "operators": {"softmax": {"tests": "tests/test_softmax.py",
                                  "benchmark": "benchmark/test_softmax_perf.py::test_softmax"}},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


@dataclass
class Result:
    mode: str
    wall_s: float
    startup_s: float  # command start to its first stage_started
    slots: int
    stage_s: float  # the stages' own durations, summed
    verdicts: dict[str, str]  # candidate -> run status
    problem: str  # the first stage that did not pass, and why
    per_device: dict[str, int]  # device a stage held (stage_finished) -> stages
    shared: int  # stages that overlapped another on the same GPU (one of them a benchmark: `benchmark_shared`)
    benchmark_shared: int
    lost: int
    duplicated: int
    stages: int


def run_mode(mode: str, template: Path, scratch: Path, address: str | None) -> Result:
    proj = scratch / mode
    shutil.copytree(template, proj)
    args = {"jobs1": ["--jobs", "1"], "cold": ["--cold"]}.get(mode, [])
    if mode == "ray":
        args += ["--executor", "ray"] + (["--ray-address", address] if address else [])
    env = dict(os.environ)
    env.setdefault("RAY_AUTH_MODE", "disabled")  # a throwaway cluster of this machine
    t0 = time.monotonic()
    first_stage = None
    events = []
    with subprocess.Popen([sys.executable, "-m", "gemswatch.watch", "run", "--json", *args], cwd=proj, env=env,
                          stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            events.append(e)
            if e["event"] == "stage_started" and first_stage is None:
                first_stage = time.monotonic() - t0
    wall = time.monotonic() - t0
    candidates = sorted(p.relative_to(proj).as_posix() for p in (proj / "variants").glob("softmax_*.py"))
    runs = Counter(e["candidate"] for e in events if e["event"] == "run_finished")
    stages = Counter((e["candidate"], e["stage"]) for e in events if e["event"] == "stage_finished" and e["status"] != "not_run")
    verdicts = {e["candidate"]: e["status"] for e in events if e["event"] == "run_finished"}
    return Result(
        mode=mode,
        wall_s=wall,
        startup_s=first_stage or 0.0,
        slots=1 if mode == "jobs1" else _slots(events),
        stage_s=sum(e["duration_s"] for e in events if e["event"] == "stage_finished"),
        verdicts=verdicts,
        problem=next((f"{e['candidate']} {e['stage']} {e['status']}: {e['message'][:300]}" for e in events
                      if e["event"] == "stage_finished" and e["status"] not in ("passed", "not_run")), ""),
        per_device=dict(Counter(str(e.get("device")) for e in events
                                if e["event"] == "stage_finished" and e["status"] != "not_run")),
        **_sharing(events),
        lost=sum(1 for c in candidates if runs[c] == 0),
        duplicated=sum(n - 1 for n in runs.values() if n > 1) + sum(n - 1 for n in stages.values() if n > 1),
        stages=sum(stages.values()),
    )


def _sharing(events: list[dict]) -> dict[str, int]:
    """Pairs of stages that ran at the same time on the same GPU (by the
    events' times and the GPU each stage_finished names), and those of them
    with a benchmark."""
    from datetime import datetime

    began = {(e["run_id"], e["stage"]): datetime.fromisoformat(e["time"]) for e in events if e["event"] == "stage_started"}
    spans = [(e.get("device"), e["stage"], began[(e["run_id"], e["stage"])], datetime.fromisoformat(e["time"]))
             for e in events if e["event"] == "stage_finished" and (e["run_id"], e["stage"]) in began and e.get("device")]
    shared = benchmark = 0
    for i, (dev, stage, start, end) in enumerate(spans):
        for other_dev, other_stage, other_start, other_end in spans[i + 1:]:
            if dev == other_dev and start < other_end and other_start < end:
                shared += 1
                benchmark += "benchmark" in (stage, other_stage)
    return {"shared": shared, "benchmark_shared": benchmark}


def _slots(events: list[dict]) -> int:
    """The most stages that ran at once (when the events name no job count)."""
    running = peak = 0
    for e in events:
        if e["event"] == "stage_started":
            running += 1
            peak = max(peak, running)
        elif e["event"] == "stage_finished" and e["status"] != "not_run":
            running -= 1
    return max(1, peak)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", type=int, default=8, help="candidates to write (default 8)")
    p.add_argument("--benchmark", action="store_true", help="benchmark every passing variant too")
    p.add_argument("--modes", default="jobs1,auto,cold,ray", help="comma-separated: jobs1, auto, cold, ray (default: all)")
    p.add_argument("--ray-address", default=None, help="join this Ray cluster instead of starting one")
    p.add_argument("--keep", action="store_true", help="keep the scratch projects (their .gemswatch/ runs)")
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    scratch = Path(tempfile.mkdtemp(prefix="gemswatch-scale-"))
    try:
        template = build_project(scratch / "template", args.variants, args.benchmark)
        results = []
        for mode in modes:
            r = run_mode(mode, template, scratch, args.ray_address)
            results.append(r)
            print(f"{mode}: {r.wall_s:.1f} s", flush=True)
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    device = detect_devices()
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores, {device.describe()}; "
          f"{args.variants} variants, benchmark {'on' if args.benchmark else 'off'}")
    serial = next((r.wall_s for r in results if r.mode == "jobs1"), None)
    print(f"{'mode':6s} {'wall s':>7s} {'slots':>5s} {'ideal s':>8s} {'ratio':>6s} {'start s':>7s} "
          f"{'ratio-start':>11s} {'stages':>6s} {'stage s':>8s} {'lost':>4s} {'dup':>4s}  verdicts")
    base = results[0].verdicts if results else {}
    for r in results:
        ideal = serial / r.slots if serial else None
        ratio = f"{r.wall_s / ideal:6.2f}" if ideal else "     -"
        after = f"{(r.wall_s - r.startup_s) / ideal:11.2f}" if ideal and r.mode == "ray" else "          -"
        same = "same" if r.verdicts == base else "DIFFERENT"
        counts = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r.verdicts.values()).items()))
        print(f"{r.mode:6s} {r.wall_s:7.1f} {r.slots:5d} {ideal if ideal else 0:8.1f} {ratio} {r.startup_s:7.1f} "
              f"{after} {r.stages:6d} {r.stage_s:8.1f} {r.lost:4d} {r.duplicated:4d}  {counts} ({same})")
    cold = next((r for r in results if r.mode == "cold"), None)
    ray = next((r for r in results if r.mode == "ray"), None)
    if cold and ray and cold.slots == ray.slots:
        print(f"ray / cold local at {ray.slots} slots: {ray.wall_s / cold.wall_s:.2f}"
              f" ({(ray.wall_s - ray.startup_s) / (cold.wall_s - cold.startup_s):.2f} without either's start-up)")
    for r in results:
        if r.problem:
            print(f"{r.mode}: {r.problem}")
        if r.mode == "ray" and any(d != "None" for d in r.per_device):
            # by the event times, which span a little more than the stage
            print(f"ray: stages per GPU {dict(sorted(r.per_device.items()))}; pairs of stages at once on one GPU "
                  f"{r.shared}, of them with a benchmark {r.benchmark_shared} (goal 0)")
    bad = any(r.lost or r.duplicated or r.verdicts != base or (r.mode == "ray" and r.shared) for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
