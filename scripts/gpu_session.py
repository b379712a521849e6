"""The watch loop on a GPU, scripted, in a scratch copy of the project.

    python scripts/gpu_session.py OUTDIR loop     # gemswatch run + a live watch session
    python scripts/gpu_session.py OUTDIR many [--files 8] [--jobs 2 [1 ...]]

``loop``: adds a deliberately slower and a deliberately wrong variant of the
bundled softmax candidate, runs ``gemswatch run --json --benchmark auto`` over
every candidate, then drives ``gemswatch candidates/ --json --benchmark auto``:
saves the slow variant, the wrong one and the bundled one, and times each
save to its last verdict.

``many``: saves FILES softmax candidates at once into a watcher with
``--benchmark auto`` and ``--jobs JOBS``, samples ``nvidia-smi`` meanwhile,
and each candidate records, when a stage loads it, the CUDA_VISIBLE_DEVICES
and the GPU count it sees. It prints whether any stage shared a GPU with a
timing benchmark and how many stages ran at once per GPU; given several
``--jobs`` values it repeats the run for each, in a fresh scratch copy, and
prints the wall-time ratios against the last. A one-file pass at the
first ``--jobs`` value runs before them, unrecorded, so Triton's compile
cache is warm for every measured run alike.

Events go to OUTDIR/*.jsonl (each line stamped with the arrival time "t");
it is a measurement that prints what it saw, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_benchmark import Watcher, scratch_copy, sha, steady_env  # noqa: E402

PY = sys.executable
FAST = "candidates/softmax_v2.py"

SLOW = """

_fast_softmax = my_softmax


def my_softmax(input, dim=-1, dtype=None):
    # Deliberately slower: the same result, computed three times.
    for _ in range(3):
        out = _fast_softmax(input, dim, dtype)
    return out
"""

WRONG = """

_right_softmax = my_softmax


def my_softmax(input, dim=-1, dtype=None):
    # Deliberately wrong: 1 % too large.
    return _right_softmax(input, dim, dtype) * 1.01
"""

PROBE = """

import os as _os
import sys as _sys

with open(_os.environ["GPU_SESSION_SEEN"], "a") as _f:
    _f.write(f"{_os.path.basename(__file__)} {'preflight' if '--preflight-only' in _sys.argv else 'benchmark' if any(a.startswith('benchmark/') for a in _sys.argv) else 'correctness'} pid={_os.getpid()} "
             f"CUDA_VISIBLE_DEVICES={_os.environ.get('CUDA_VISIBLE_DEVICES')} "
             f"gpus_seen={torch.cuda.device_count()}\\n")
"""


def map_to_softmax(proj: Path, names: list[str]) -> None:
    """Map candidate files to softmax in config.yaml's candidates: block."""
    config = proj / "config.yaml"
    lines = config.read_text().splitlines(keepends=True)
    at = lines.index("candidates:\n") + 1
    lines[at:at] = [f"  {name}:\n    softmax: my_softmax\n" for name in names]
    config.write_text("".join(lines))


def add_candidates(proj: Path, sources: dict[str, str]) -> None:
    map_to_softmax(proj, list(sources))
    for name, text in sources.items():
        (proj / "candidates" / name).write_text(text)


def dump(path: Path, events: list[tuple[float, dict]], t0: float) -> None:
    with path.open("w") as f:
        for t, e in events:
            f.write(json.dumps({"t": round(t - t0, 3), **e}) + "\n")


def loop(out: Path, proj: Path) -> None:
    base = (proj / FAST).read_text()
    add_candidates(proj, {"softmax_slow.py": base + SLOW, "softmax_wrong.py": base + WRONG})

    t0 = time.monotonic()
    cmd = [PY, "-m", "gemswatch.watch", "run", "--json", "--benchmark", "auto"]
    done = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, env=steady_env(), timeout=400)
    (out / "run.jsonl").write_text(done.stdout)
    (out / "run.stderr").write_text(done.stderr)
    print(f"gemswatch run --json --benchmark auto: exit {done.returncode} in {time.monotonic() - t0:.1f} s")
    for line in done.stdout.splitlines():
        e = json.loads(line)
        if e.get("event") == "stage_finished":
            sp = e.get("speedups") or {}
            print(f"  {e['candidate']:32s} {e['stage']:12s} {e['status']:8s} {e.get('duration_s', '')}"
                  f"{'  speedup ' + json.dumps(sp) if sp else ''}")

    w = Watcher(proj, "candidates/", "--benchmark", "auto", "--no-initial")
    t0 = time.monotonic()
    try:
        time.sleep(3)
        for name, expect in (("softmax_slow.py", "benchmark"), ("softmax_wrong.py", "correctness"), ("softmax_v2.py", "benchmark")):
            path = proj / "candidates" / name
            start = time.monotonic()
            path.write_text(path.read_text() + "\n# saved by gpu_session\n")
            digest = sha(path)
            t, e = w.wait(lambda e, d=digest: e["event"] == "run_finished" and e.get("content_sha256") == d, 300, name)
            stages = [ev for _, ev in w.events if ev.get("event") == "stage_finished" and ev.get("content_sha256") == digest]
            print(f"save {name}: run finished {t - start:.1f} s after the save; " + ", ".join(
                f"{s['stage']} {s['status']}" + (f" speedup {s['speedups']}" if s.get("speedups") else "") for s in stages))
    finally:
        w.stop()
        dump(out / "watch.jsonl", w.events, t0)


def smi_sampler(path: Path, stop: threading.Event, t0: float) -> None:
    if shutil.which("nvidia-smi") is None:
        return
    with path.open("w") as f:
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                              capture_output=True, text=True)
        f.writelines(f"# gpu {line}\n" for line in gpus.stdout.splitlines())
        while not stop.is_set():
            q = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader"],
                               capture_output=True, text=True)
            for line in q.stdout.splitlines():
                f.write(f"{time.monotonic() - t0:.2f}, {line}\n")
            f.flush()
            stop.wait(0.5)


def overlaps(events: list[tuple[float, dict]]) -> tuple[int, int, dict[str, int]]:
    """(stage pairs that overlapped on one GPU while one was a benchmark,
    benchmark stages, most stages at once per GPU) from the event stream."""
    spans: list[tuple[float, float, str, str]] = []
    started: dict[tuple[str, str, str], float] = {}
    for t, e in events:
        key = (e.get("candidate"), e.get("stage"), e.get("content_sha256"))
        if e.get("event") == "stage_started":
            started[key] = t
        elif e.get("event") == "stage_finished" and key in started:
            spans.append((started.pop(key), t, e.get("stage"), str(e.get("device"))))
    bad = 0
    for i, a in enumerate(spans):
        for b in spans[i + 1:]:
            if a[3] == b[3] and a[0] < b[1] and b[0] < a[1] and "benchmark" in (a[2], b[2]):
                bad += 1
    most: dict[str, int] = {}
    for s in spans:
        at_once = sum(1 for o in spans if o[3] == s[3] and o[0] <= s[0] < o[1])
        most[s[3]] = max(most.get(s[3], 0), at_once)
    return bad, sum(1 for s in spans if s[2] == "benchmark"), most


def many(out: Path, proj: Path, n_files: int, jobs: int) -> float:
    out.mkdir(parents=True, exist_ok=True)
    base = (proj / FAST).read_text()
    names = [f"softmax_many_{i}.py" for i in range(n_files)]
    # The files must exist before the watcher starts (the config names them);
    # the saves under test overwrite them all at once.
    add_candidates(proj, {name: base for name in names})

    # Stages load a snapshot of each save, so the probe writes where this says.
    os.environ["GPU_SESSION_SEEN"] = str(proj / "seen.txt")
    os.environ["GEMSWATCH_CANDIDATE_WRITABLE"] = str(proj)  # the probe runs in the sandboxed worker
    w = Watcher(proj, "candidates/", "--benchmark", "auto", "--no-initial", "--jobs", str(jobs))
    stop = threading.Event()
    t0 = time.monotonic()
    sampler = threading.Thread(target=smi_sampler, args=(out / f"smi-jobs{jobs}.csv", stop, t0), daemon=True)
    sampler.start()
    try:
        time.sleep(3)
        start = time.monotonic()
        for i, name in enumerate(names):
            (proj / "candidates" / name).write_text(base + PROBE + f"\n# variant {i}\n")
        for name in names:
            w.wait(lambda e, c=f"candidates/{name}": e["event"] == "run_finished" and e["candidate"] == c, 600, name)
        wall = time.monotonic() - start
    finally:
        stop.set()
        w.stop()
        dump(out / f"many-jobs{jobs}.jsonl", w.events, t0)
    bad, n_bench, most = overlaps(w.events)
    seen = (proj / "seen.txt").read_text() if (proj / "seen.txt").exists() else ""
    (out / f"seen-jobs{jobs}.txt").write_text(seen)
    statuses = [(e["candidate"], e["stage"], e["status"]) for _, e in w.events if e.get("event") == "stage_finished"]
    print(f"{n_files} files saved at once, --jobs {jobs}: all runs finished in {wall:.1f} s")
    print(f"  stages finished: {len(statuses)}, not passed: {[s for s in statuses if s[2] != 'passed']}")
    print(f"  benchmark stages: {n_bench}; stages sharing a GPU with a running benchmark: {bad}")
    print(f"  most stages at once per device: {most}")
    views = sorted({line.split(' pid=')[1].split(' ', 1)[1] for line in seen.splitlines() if ' pid=' in line})
    print(f"  what the stages saw: {views}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("what", choices=["loop", "many"])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--jobs", type=int, nargs="+", default=[2])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "loop":
        with tempfile.TemporaryDirectory(prefix="gemswatch-gpu-") as tmp:
            loop(args.out, scratch_copy(Path(tmp) / "project"))
        return 0
    with tempfile.TemporaryDirectory(prefix="gemswatch-gpu-") as tmp:
        print("warm-up pass (fills the compile cache; not compared):")
        many(args.out / "warmup", scratch_copy(Path(tmp) / "project"), 1, args.jobs[0])
    walls = []
    for jobs in args.jobs:
        with tempfile.TemporaryDirectory(prefix="gemswatch-gpu-") as tmp:
            walls.append(many(args.out, scratch_copy(Path(tmp) / "project"), args.files, jobs))
    last = args.jobs[-1]
    for jobs, wall in zip(args.jobs[:-1], walls[:-1]):
        print(f"--jobs {jobs} / --jobs {last}: {wall:.1f} s / {walls[-1]:.1f} s = {wall / walls[-1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
