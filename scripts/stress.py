"""Stress the watch loop: a storm of saves, then ``kill -9`` of the watcher.

    python scripts/stress.py [--saves 200] [--files 10] [--seconds 60] [--seed 7] [--cold] [--keep]

Runs ``gemswatch --json`` on a scratch copy of the torch-free project of
tests/e2e/test_watch_e2e.py, with candidates whose stages take about
0.2-1 s, and prints its figures:

1. **Saves.** ``--saves`` saves spread over ``--files`` files within
   ``--seconds``: atomic renames (a temp file renamed over the target) and
   in-place writes of random content variants, some of them identical
   re-saves. Then it waits for quiescence and checks that every file's final
   result (its last ``run_finished``) tested the SHA-256 of the file's final
   bytes and passed, and that no two stages of one file ever overlapped: in
   the event stream (``stage_started`` .. ``stage_finished`` per file) and in
   the candidates' own trace of the processes that ran them.
2. **kill -9.** Long-running stages on every file (one of them also starts a
   child in a session of its own), a new watcher, ``kill -9`` of it while its
   stages run: cold stages (``--cold``), then warm ones. No process of a stage
   (found by the stage's environment marker, the pids the candidates record,
   and the watcher's process tree taken just before the kill) may survive,
   and ``.gemswatch/history.jsonl`` must be whole lines of JSON.

Exit status 0 when every check holds, 1 otherwise. ``run_stress`` is the
same thing as a function (tests/e2e/test_stress.py runs a short version).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from _e2e_helpers import write_files  # noqa: E402
from test_watch_e2e import FILES  # noqa: E402  (the torch-free project)

PY = sys.executable

CANDIDATE = '''\
"""Stress candidate {name}, variant {variant}."""
import math
import os
import time

DELAY = {delay}


def _trace(t0):
    # Which process ran this file's candidate, and when (the overlap check).
    with open(os.environ["STRESS_TRACE"], "a") as f:
        f.write(f"{name} {{os.getpid()}} {{t0:.6f}} {{time.time():.6f}}\\n")


def my_softmax(xs):
    t0 = time.time()
    open(os.path.join(os.environ["STRESS_PIDS"], str(os.getpid())), "w").close()
    {spawn}time.sleep(DELAY)
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    _trace(t0)
    return [v / s for v in e]
'''

# A child in a session of its own, as a candidate might start (phase 2).
SPAWN = """import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    open(os.path.join(os.environ["STRESS_PIDS"], str(child.pid)), "w").close()
    """

CONFIG = """\
watch: cands
benchmark: never
jobs: {jobs}
grace: 1
warm: true
preload: [pytest]
timeouts: {{preflight: 120, correctness: 120}}
env: {{STRESS_TRACE: {trace}, STRESS_PIDS: {pids}, GEMSWATCH_CANDIDATE_WRITABLE: "{writable}"}}
candidates:
  "s*.py": {{softmax: my_softmax}}
operators:
  softmax:
    tests: tests/test_ops.py
    benchmark: benchmark/test_perf.py::test_softmax
"""


def candidate(name: str, variant: int, delay: float, spawn: bool = False) -> str:
    return CANDIDATE.format(name=name, variant=variant, delay=delay, spawn=SPAWN if spawn else "")


def build_project(root: Path, n_files: int, jobs: int) -> Path:
    """The e2e project's library, tests and benchmark, with ``n_files`` candidates."""
    write_files(root, {rel: text for rel, text in FILES.items() if not rel.startswith("cands/")})
    (root / "cands").mkdir()
    (root / "pids").mkdir()
    for i in range(n_files):
        (root / "cands" / f"s{i}.py").write_text(candidate(f"s{i}", 0, 0.05))
    (root / "trace").mkdir()
    (root / "config.yaml").write_text(CONFIG.format(jobs=jobs, trace=root / "trace" / "trace.txt", pids=root / "pids",
                                                    writable=f"{root / 'trace'}{os.pathsep}{root / 'pids'}"))
    return root


# -- the watcher -----------------------------------------------------------------


class Watcher:
    """``gemswatch --json`` as a child; events and notes read by threads."""

    def __init__(self, project: Path, *args: str):
        env = {**os.environ, "GEMSWATCH_DEVICE": "cpu"}
        env.pop("PYTEST_CURRENT_TEST", None)
        self.proc = subprocess.Popen(
            [PY, "-m", "gemswatch.watch", "--json", *args],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.events: list[dict] = []
        self.notes: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream, is_events: bool) -> None:
        for line in stream:
            if not line.strip():
                continue
            if is_events:
                try:
                    self.events.append(json.loads(line))
                except ValueError:  # the watcher killed mid-line
                    self.notes.append(f"(torn event line) {line.rstrip()}")
            else:
                self.notes.append(line.rstrip())

    def of(self, event: str) -> list[dict]:
        return [e for e in list(self.events) if e["event"] == event]

    def wait(self, pred, timeout: float, what: str) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if pred():
            return True
        print(f"  timed out after {timeout:.0f} s waiting for {what}; last notes: {self.notes[-3:]}", file=sys.stderr)
        return False

    def stop(self, timeout: float = 30) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None
        finally:
            for t in self._threads:
                t.join(5)


# -- processes ---------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def descendants(root: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None:
                kids.setdefault(int(st[1]), []).append(int(d.name))
    out: set[int] = set()
    todo = list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += kids.get(pid, [])
    return out


def marked(run_ids: set[str]) -> set[int]:
    """Live processes whose environment names one of ``run_ids``."""
    wanted = {f"GEMSWATCH_RUN_ID={r}".encode() for r in run_ids}
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                env = set((d / "environ").read_bytes().split(b"\0"))
            except OSError:
                continue
            if env & wanted and alive(int(d.name)):
                out.add(int(d.name))
    return out


def recorded(project: Path) -> set[int]:
    return {int(p.name) for p in (project / "pids").iterdir() if p.name.isdigit()}


def describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:100]})"


# -- checks ------------------------------------------------------------------------


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stream_overlaps(events: list[dict]) -> list[str]:
    """Stages of one file open at once in the event stream."""
    open_: dict[str, tuple[str, str]] = {}
    out = []
    for e in events:
        cand = e.get("candidate")
        if e["event"] == "stage_started":
            if cand in open_:
                out.append(f"{cand}: {e['run_id']} {e['stage']} started while {open_[cand]} ran")
            open_[cand] = (e["run_id"], e["stage"])
        elif e["event"] == "stage_finished" and open_.get(cand) == (e["run_id"], e["stage"]):
            del open_[cand]
    return out


def trace_overlaps(trace: Path) -> list[str]:
    """Two processes running one file's candidate at the same time."""
    spans: dict[str, dict[int, list[float]]] = {}
    if trace.exists():
        for line in trace.read_text().splitlines():
            parts = line.split()
            if len(parts) != 4:
                continue
            name, pid, t0, t1 = parts[0], int(parts[1]), float(parts[2]), float(parts[3])
            span = spans.setdefault(name, {}).setdefault(pid, [t0, t1])
            span[0], span[1] = min(span[0], t0), max(span[1], t1)
    out = []
    for name, by_pid in spans.items():
        ordered = sorted(by_pid.items(), key=lambda kv: kv[1][0])
        for (p1, (a0, a1)), (p2, (b0, b1)) in zip(ordered, ordered[1:]):
            if b0 < a1:
                out.append(f"{name}: pids {p1} and {p2} overlap by {a1 - b0:.3f} s")
    return out


def history_lines(project: Path) -> tuple[int, list[str]]:
    """(lines, the ones that are not whole JSON objects)."""
    path = project / ".gemswatch" / "history.jsonl"
    data = path.read_bytes() if path.exists() else b""
    bad = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        bad.append(f"no newline at the end: {lines[-1][:80]!r}")
    for i, line in enumerate(lines, 1):
        try:
            if not isinstance(json.loads(line), dict):
                raise ValueError
        except ValueError:
            bad.append(f"line {i}: {line[:80]!r}")
    return len(lines), bad


# -- phase 1: saves ----------------------------------------------------------------


def storm(project: Path, saves: int, seconds: float, seed: int, cold: bool = False) -> dict:
    rng = random.Random(seed)
    files = sorted((project / "cands").glob("s*.py"))
    w = Watcher(project, *(["--cold"] if cold else []))
    fig: dict = {"saves": 0, "atomic": 0, "in_place": 0, "identical": 0}
    try:
        if not w.wait(lambda: w.of("watch_started"), 30, "watch_started"):
            raise RuntimeError("the watcher did not start: " + " | ".join(w.notes[-5:]))
        start = time.monotonic()
        variant = 0
        for i in range(saves):
            time.sleep(max(0.0, start + i * seconds / saves - time.monotonic()))
            path = rng.choice(files)
            if rng.random() < 0.15:
                data = path.read_bytes()  # an identical re-save
                fig["identical"] += 1
            else:
                variant += 1
                data = candidate(path.stem, variant, rng.choice((0.02, 0.05, 0.1, 0.15))).encode()
            if rng.random() < 0.5:
                tmp = path.with_name(f".{path.name}.{i}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)
                fig["atomic"] += 1
            else:
                with open(path, "wb") as f:
                    f.write(data)
                fig["in_place"] += 1
            fig["saves"] += 1
        fig["save_s"] = time.monotonic() - start
        final = {f"cands/{p.name}": sha(p.read_bytes()) for p in files}

        def settled() -> bool:
            last = {e["candidate"]: e for e in w.of("run_finished")}
            done = {e["run_id"] for e in w.of("run_finished")}
            return all(e["run_id"] in done for e in w.of("run_queued")) and all(
                c in last and last[c]["content_sha256"] == s for c, s in final.items()
            )

        settle_start = time.monotonic()
        fig["settled"] = w.wait(settled, 60 + 2 * len(files), "quiescence")
        fig["settle_s"] = time.monotonic() - settle_start
        time.sleep(1.0)  # nothing more may start
        events = list(w.events)
    finally:
        fig["rc"] = w.stop()
    last = {e["candidate"]: e for e in events if e["event"] == "run_finished"}
    fig["mismatches"] = [
        f"{c}: final bytes {s[:8]}, last result {last[c]['content_sha256'][:8] if c in last else None}"
        f" {last[c]['status'] if c in last else ''}"
        for c, s in final.items()
        if c not in last or last[c]["content_sha256"] != s or last[c]["status"] != "passed"
    ]
    started = {e["run_id"] for e in events if e["event"] == "stage_started"}
    finished = [e for e in events if e["event"] == "run_finished"]
    fig["runs_queued"] = len([e for e in events if e["event"] == "run_queued"])
    fig["runs_started"] = len(started)
    fig["superseded"] = len([e for e in finished if e["status"] == "superseded"])
    fig["passed"] = len([e for e in finished if e["status"] == "passed"])
    fig["other"] = sorted(
        {f"{e['candidate']} {e['status']}: {e['message']}" for e in finished if e["status"] not in ("passed", "superseded")}
    )
    fig["stages"] = len([e for e in events if e["event"] == "stage_finished"])
    fig["warm_stages"] = len([e for e in events if e["event"] == "stage_finished" and e.get("warm")])
    fig["overlaps"] = stream_overlaps(events) + trace_overlaps(project / "trace" / "trace.txt")
    fig["notes"] = [n for n in w.notes if "error" in n.lower() or "traceback" in n.lower()]
    return fig


# -- phase 2: kill -9 --------------------------------------------------------------


def kill_midrun(project: Path, cold: bool, grace_s: float = 5.0) -> dict:
    """Every file hangs in its stage (one also starts an escaping child);
    kill -9 the watcher once ``jobs`` stages run; count what survives."""
    files = sorted((project / "cands").glob("s*.py"))
    for n, path in enumerate(files):
        path.write_text(candidate(path.stem, 10_000 + n, 60.0, spawn=(n == 0)))
    for p in (project / "pids").iterdir():
        p.unlink()
    w = Watcher(project, *(["--cold"] if cold else []))
    fig: dict = {"mode": "cold" if cold else "warm"}
    before: set[int] = set()
    try:
        jobs = None

        def running() -> bool:
            nonlocal jobs
            ws = w.of("watch_started")
            if not ws:
                return False
            jobs = ws[0]["jobs"]
            # every running stage is inside the candidate (its pid recorded), and s0's child exists
            return len(w.of("stage_started")) >= jobs and len(recorded(project)) >= jobs + 1
        fig["running"] = w.wait(running, 60, f"{'cold' if cold else 'warm'} stages to run")
        time.sleep(0.3)
        run_ids = {e["run_id"] for e in w.of("run_queued")}
        tree = descendants(w.proc.pid)
        stages = {p for p in marked(run_ids) | recorded(project) if alive(p)}
        before = tree | stages
        fig["stage_processes"] = len(stages)
        fig["helpers"] = len([p for p in tree - stages if alive(p)])  # the warm pool, the reaper
        fig["warm_at_kill"] = [e.get("warm") for e in w.of("stage_started")]
        t0 = time.monotonic()
        w.proc.kill()  # SIGKILL: no handler, no cleanup in the watcher
        w.proc.wait(10)
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            left = [p for p in before | marked(run_ids) if alive(p)]
            if not left:
                break
            time.sleep(0.05)
        left = [p for p in before | marked(run_ids) if alive(p)]
        fig["gone_s"] = time.monotonic() - t0
        fig["survivors"] = [describe(p) for p in sorted(left)]
    finally:
        w.stop(5)
        # Leave nothing behind whatever happened.
        for pid in [p for p in before | recorded(project) if alive(p)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return fig


# -- all of it ---------------------------------------------------------------------


def run_stress(
    root: Path,
    saves: int = 200,
    files: int = 10,
    seconds: float = 60.0,
    seed: int = 7,
    jobs: int | None = None,
    cold: bool = False,
) -> dict:
    """Both phases in the scratch folder ``root``; returns the figures."""
    t0 = time.monotonic()
    jobs = jobs or max(2, os.cpu_count() or 1)
    project = build_project(root, files, jobs)
    fig = {"files": files, "jobs": jobs, "storm": storm(project, saves, seconds, seed, cold)}
    fig["kill"] = [kill_midrun(project, cold=True), kill_midrun(project, cold=False)]
    fig["history_lines"], fig["history_bad"] = history_lines(project)
    fig["wall_s"] = time.monotonic() - t0
    s = fig["storm"]
    fig["ok"] = bool(
        s["settled"]
        and not s["mismatches"]
        and not s["overlaps"]
        and s["saves"] == saves
        and all(k["running"] and not k["survivors"] for k in fig["kill"])
        and not fig["history_bad"]
    )
    return fig


def report(fig: dict) -> str:
    s = fig["storm"]
    lines = [
        f"saves made:          {s['saves']} over {fig['files']} files in {s['save_s']:.1f} s"
        f" ({s['atomic']} atomic renames, {s['in_place']} in-place writes, {s['identical']} identical re-saves)",
        f"runs queued:         {s['runs_queued']}",
        f"runs started:        {s['runs_started']} ({s['stages']} stages finished, {s['warm_stages']} of them warm; jobs {fig['jobs']})",
        f"superseded:          {s['superseded']}",
        f"passed:              {s['passed']}" + (f"; other: {s['other']}" if s["other"] else ""),
        f"quiescent after:     {s['settle_s']:.1f} s" + ("" if s["settled"] else " (NOT SETTLED)"),
        f"final mismatches:    {len(s['mismatches'])}" + "".join(f"\n  {m}" for m in s["mismatches"]),
        f"overlaps:            {len(s['overlaps'])}" + "".join(f"\n  {m}" for m in s["overlaps"][:10]),
    ]
    for k in fig["kill"]:
        lines.append(
            f"kill -9 ({k['mode']}):      {k['stage_processes']} stage processes"
            f" (+{k['helpers']} of gemswatch's helpers) at the kill,"
            f" survivors {len(k['survivors'])}" + (f" after {k['gone_s']:.2f} s" if not k["survivors"] else "")
            + ("" if k["running"] else " (stages never ran)")
            + "".join(f"\n  {p}" for p in k["survivors"])
        )
    lines += [
        f"history lines:       {fig['history_lines']}, not whole JSON: {len(fig['history_bad'])}"
        + "".join(f"\n  {b}" for b in fig["history_bad"][:5]),
        f"wall time:           {fig['wall_s']:.1f} s",
        "result:              " + ("OK" if fig["ok"] else "FAILED"),
    ]
    if s["notes"]:
        lines.append("watcher notes: " + " | ".join(s["notes"][:5]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--saves", type=int, default=200)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=None, help="stages at once (default: the CPU count, at least 2)")
    ap.add_argument("--cold", action="store_true", help="start the saves' stages cold (default: warm)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch project and print its path")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="gemswatch-stress-"))
    try:
        fig = run_stress(root, args.saves, args.files, args.seconds, args.seed, args.jobs, args.cold)
        print(report(fig))
    finally:
        if args.keep:
            print(f"project: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if fig["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
