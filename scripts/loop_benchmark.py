"""The save-to-verdict loop, measured: warm start, the real watcher, the
hand-run chain, many files at once, and the idle watcher.

    python scripts/loop_benchmark.py [--repeat N] [--only abcdefg] [--keep]
    python scripts/loop_benchmark.py --only g [--device cpu] [--spares on]

Everything runs on this machine in one go, in a scratch copy of the project
(its ``.gemswatch/`` is never touched), and prints figures and their ratios
against the goals of the warm-start issue:

  (a) stage start, warm vs cold: a trivial stage that imports what every
      stage imports (torch, triton, gemswatch.gems, the test plugin), and an
      empty selection of tests/test_softmax.py;
  (b) save -> preflight verdict and save -> correctness verdict for
      candidates/softmax_v2.py through ``gemswatch candidates/ --json``
      (file write to the ``stage_finished`` event), warm and ``--cold``;
  (c) the same two verdicts by hand: the preflight and the correctness
      command lines the watcher uses, run cold one after the other;
  (d) 16 files saved at once, ``--jobs 1`` vs ``--jobs 2``;
  (e) the idle watcher's CPU and resident memory (and the pool's), and
      before any save with ``spares: off`` and ``on`` (and the spares');
  (f) save -> correctness verdict, warm, with the candidate judged from a
      worker process of its own (the default) and in the judging process
      (``GEMSWATCH_CANDIDATE_ISOLATION=off``), rounds A B B A;
  (g) the loop on the stages' device (``--only g``; a GPU where CUDA is
      present, else the CPU, or ``--device cpu``): stage start from a spare,
      the warm pool and cold (a stage that also initialises the device);
      then one watcher (spares as ``--spares`` says; on for a GPU) with an
      empty Triton cache: the first save after start, saves that change only
      a comment (the Triton cache must gain no kernel) and saves that change
      a constant in the kernel, each save -> preflight and save ->
      correctness, against the GPU goals (<= 2.0 s for an unchanged
      kernel, <= 4.0 s for a changed one, spare start <= 0.1 x cold).

It is a measurement, not a test: nothing fails, it reports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gemswatch.watch.config import load_config  # noqa: E402
from gemswatch.watch.mapping import CandidateMap  # noqa: E402
from gemswatch.watch.devices import detect_devices  # noqa: E402
from gemswatch.watch.stage.plan import base_env, stage_command  # noqa: E402
from gemswatch.watch.stage.pytest_log import SESSION_NOTE  # noqa: E402
from gemswatch.watch.stage.spares import SpareStarter  # noqa: E402
from gemswatch.watch.stage.supervise import run_process  # noqa: E402
from gemswatch.watch.stage.warm import WarmStarter  # noqa: E402

PY = sys.executable
SOFTMAX = "candidates/softmax_v2.py"
GOALS = {
    "start": 0.15,  # warm stage start <= 0.15 x cold
    "chain": 0.35,  # save -> correctness <= 0.35 x the hand-run chain
    "jobs": 1.7,  # 16 files: jobs 2 at least 1.7 x faster than jobs 1
    "cpu": 1.0,  # idle watcher: under 1 % CPU
    "rss": 80.0,  # ... and under 80 MB resident
    "isolation": 1.15,  # save -> correctness, judge out of process <= 1.15 x in process
    "spare_start": 0.1,  # (g) spare stage start <= 0.1 x cold
    "unchanged": 2.0,  # (g) save -> correctness, kernel unchanged, seconds
    "changed": 4.0,  # (g) save -> correctness, a constant of the kernel changed, seconds
}


def scratch_copy(dest: Path) -> Path:
    """The project without its history, run folders, unit tests or the package
    itself (stages import the installed gemswatch, as in a user's checkout)."""
    ignore = shutil.ignore_patterns(".git", ".gemswatch", "__pycache__", "*.egg-info", "unit", "e2e", "gemswatch", "scripts", ".triton")
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def steady_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


# -- (a) stage start ------------------------------------------------------------


NOOP = """\
import gemswatch.gems  # noqa: F401  (what every stage imports: torch, triton, the library)


def test_noop():
    pass
"""


def stage_start(proj: Path, repeat: int) -> dict[str, dict[str, float]]:
    (proj / "tests" / "test_zz_noop.py").write_text(NOOP)
    cfg = load_config(proj / "config.yaml")
    env = base_env(cfg)
    starter = WarmStarter(log_path=proj / ".gemswatch" / "warm.log")
    starter.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=env)
    stages = {
        "trivial stage": ["tests/test_zz_noop.py"],
        "empty selection": ["tests/test_softmax.py", "-m", "no_such_marker"],
    }
    out: dict[str, dict[str, float]] = {}
    try:
        for name, args in stages.items():
            cmd = [cfg.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
            times: dict[str, list[float]] = {"warm": [], "cold": []}
            for i in range(repeat + 1):  # the first warm one waits for the pool: not counted
                for mode in ("warm", "cold"):
                    stage_env = {**env, "GEMSWATCH_RUN_ID": f"bench-{i}"}
                    t0 = time.perf_counter()
                    o = run_process(
                        cmd, cwd=proj, env=stage_env, log_path=proj / f"start-{mode}.log", timeout=120,
                        cancel=threading.Event(), warm=starter if mode == "warm" else None,
                    )
                    dt = time.perf_counter() - t0
                    if o.warm != (mode == "warm"):
                        print(f"  note: a {mode} run started {'warm' if o.warm else 'cold'}: {starter.state}")
                    if i:
                        times[mode].append(dt)
            out[name] = {k: median(v) for k, v in times.items()}
    finally:
        starter.shutdown()
        (proj / "tests" / "test_zz_noop.py").unlink()
    return out


# -- the watcher as a child process ---------------------------------------------------


class Watcher:
    """``gemswatch --json`` in the scratch project; events stamped on arrival."""

    def __init__(self, proj: Path, *args: str):
        self.proj = proj
        self.proc = subprocess.Popen(
            [PY, "-m", "gemswatch.watch", "--json", *args],
            cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=steady_env(),
        )
        self.events: list[tuple[float, dict]] = []
        self.notes: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read_events, daemon=True).start()
        threading.Thread(target=self._read_notes, daemon=True).start()

    def _read_events(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                with self._lock:
                    self.events.append((time.monotonic(), json.loads(line)))

    def _read_notes(self) -> None:
        for line in self.proc.stderr:
            with self._lock:
                self.notes.append((time.monotonic(), line.rstrip()))

    def wait(self, pred, timeout: float, what: str) -> tuple[float, dict]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                hits = [(t, e) for t, e in self.events if pred(e)]
            if hits:
                return hits[-1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        raise RuntimeError(f"timed out waiting for {what}; stderr: {[n for _, n in self.notes][-5:]}")

    def wait_note(self, text: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if any(text in n for _, n in self.notes):
                    return
            time.sleep(0.01)
        raise RuntimeError(f"no note {text!r}; stderr: {[n for _, n in self.notes][-5:]}")

    def count(self, event: str) -> int:
        with self._lock:
            return len([e for _, e in self.events if e["event"] == event])

    def stop(self) -> None:
        self.proc.send_signal(2)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_to_verdict(proj: Path, repeat: int, cold: bool) -> tuple[dict[str, float], Watcher | None]:
    """Median seconds from writing the softmax candidate to its preflight and
    correctness ``stage_finished`` events. Returns the (still running) warm
    watcher for the idle measurement."""
    args = ["candidates/"] + (["--cold"] if cold else [])
    w = Watcher(proj, *args)
    target = proj / SOFTMAX
    original = target.read_text()
    times: dict[str, list[float]] = {"preflight": [], "correctness": []}
    try:
        for cand in ("candidates/softmax_v2.py", "candidates/rms_norm_v2.py"):
            w.wait(lambda e, c=cand: e["event"] == "run_finished" and e["candidate"] == c, 240, f"the first run of {cand}")
        time.sleep(1.0)
        for i in range(repeat):
            t0 = time.monotonic()
            target.write_text(original + f"\n# loop benchmark save {i} {'cold' if cold else 'warm'}\n")
            digest = sha(target)
            for stage in ("preflight", "correctness"):
                t, e = w.wait(
                    lambda e, s=stage: e["event"] == "stage_finished" and e["stage"] == s and e["content_sha256"] == digest,
                    120,
                    f"{stage} of save {i}",
                )
                if e["status"] != "passed" or e.get("warm") == cold:
                    print(f"  note: save {i} {stage}: {e['status']} warm={e.get('warm')} {e.get('message', '')[:120]}")
                times[stage].append(t - t0)
            w.wait(lambda e: e["event"] == "run_finished" and e["content_sha256"] == digest, 60, "run_finished")
            time.sleep(0.5)
    except BaseException:
        w.stop()
        raise
    finally:
        target.write_text(original)
    if cold:
        w.stop()
        w = None
    return {k: median(v) for k, v in times.items()}, w


def isolation_cost(proj: Path, repeat: int) -> dict[str, float]:
    """save -> correctness (median, warm) with the judge out of process and in
    it, in rounds A B B A so that a drifting machine hurts both alike."""
    config = proj / "config.yaml"
    original = config.read_text()
    times: dict[str, list[float]] = {"worker": [], "off": []}
    try:
        for mode in ("worker", "off", "off", "worker"):
            text = original if mode == "worker" else original + "\nenv:\n  GEMSWATCH_CANDIDATE_ISOLATION: \"off\"\n"
            config.write_text(text)
            b, w = save_to_verdict(proj, max(2, repeat // 2), cold=False)
            w.stop()
            times[mode].append(b["correctness"])
    finally:
        config.write_text(original)
    return {k: median(v) for k, v in times.items()}


# -- (c) by hand ---------------------------------------------------------------------


def hand_chain(proj: Path, repeat: int) -> dict[str, float]:
    """The two cold commands a user runs without gemswatch, one after the other."""
    cfg = load_config(proj / "config.yaml")
    cand = CandidateMap(cfg).lookup(proj / SOFTMAX)
    out = proj / "hand"
    out.mkdir(exist_ok=True)
    cmds = {s: stage_command(cfg, cand, s, cand.path, out / f"{s}.json") for s in ("preflight", "correctness")}
    times: dict[str, list[float]] = {"preflight": [], "correctness": [], "chain": []}
    for _ in range(repeat):
        total = 0.0
        for stage, cmd in cmds.items():
            t0 = time.perf_counter()
            r = subprocess.run(cmd, cwd=proj, capture_output=True, env=steady_env())
            dt = time.perf_counter() - t0
            if r.returncode != 0:
                print(f"  note: by hand, {stage} exited {r.returncode}")
            times[stage].append(dt)
            total += dt
        times["chain"].append(total)
    return {k: median(v) for k, v in times.items()}


# -- (d) 16 files at once -----------------------------------------------------------------


_SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range(6_000_000):\n    x += i\nprint(time.perf_counter() - t)\n"


def parallel_capacity() -> float:
    """How many CPU-bound processes run at full speed at once right now:
    twice the time of one divided by the time of two side by side (2.0 on
    an idle two-core machine). Other load on the machine lowers it."""
    def spin(k: int) -> float:
        t0 = time.perf_counter()
        procs = [subprocess.Popen([PY, "-c", _SPIN], stdout=subprocess.DEVNULL) for _ in range(k)]
        for p in procs:
            p.wait()
        return time.perf_counter() - t0

    one = median([spin(1) for _ in range(3)])
    two = median([spin(2) for _ in range(3)])
    return 2 * one / two


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def many_files(proj: Path, n: int = 16) -> dict[int, float]:
    gen = proj / "candidates" / "gen"
    gen.mkdir(exist_ok=True)
    text = (proj / SOFTMAX).read_text()
    for i in range(n):
        (gen / f"softmax_g{i:02d}.py").write_text(text)
    cfg = proj / "config.yaml"
    original = cfg.read_text()
    cfg.write_text(original.replace("candidates:\n", "candidates:\n  gen/*.py:\n    softmax: my_softmax\n", 1))
    times: dict[int, list[float]] = {1: [], 2: []}
    try:
        for jobs in (1, 2, 2, 1):  # A B B A: a drifting machine load hits both alike
            w = Watcher(proj, "candidates/", "--no-initial", "--jobs", str(jobs))
            try:
                w.wait_note("warm start: pool", 120)
                before = w.count("run_finished")
                t0 = time.monotonic()
                for i in range(n):  # a generator writing its variants
                    (gen / f"softmax_g{i:02d}.py").write_text(text + f"\n# variant {i} jobs {jobs}\n")
                end = time.monotonic() + 600
                while w.count("run_finished") < before + n and time.monotonic() < end:
                    time.sleep(0.01)
                t_last, _ = w.wait(lambda e: e["event"] == "run_finished", 1, "the last run")
                with w._lock:
                    runs = [e for _, e in w.events if e["event"] == "run_finished"][before:]
                bad = [r for r in runs if r["status"] != "passed"]
                if bad:
                    print(f"  note: jobs {jobs}: {len(bad)} runs did not pass: {bad[0].get('message', '')[:120]}")
                times[jobs].append(t_last - t0)
            finally:
                w.stop()
    finally:
        cfg.write_text(original)
        shutil.rmtree(gen)
    return {k: statistics.mean(v) for k, v in times.items()}


# -- (e) idle ---------------------------------------------------------------------------


def _ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def idle(watcher: Watcher, seconds: float = 10.0) -> dict[str, float]:
    pid = watcher.proc.pid
    pools = [c for c in _children(pid) if b"warmpool/server.py" in Path(f"/proc/{c}/cmdline").read_bytes()]
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), _ticks(pid)
    p0 = sum(_ticks(p) for p in pools)
    time.sleep(seconds)
    dt = time.monotonic() - t0
    return {
        "cpu": (_ticks(pid) - c0) / hz / dt * 100,
        "rss": _rss_mb(pid),
        "pool_cpu": (sum(_ticks(p) for p in pools) - p0) / hz / dt * 100 if pools else float("nan"),
        "pool_rss": sum(_rss_mb(p) for p in pools) if pools else float("nan"),
    }


def idle_with_spares(proj: Path, seconds: float = 10.0) -> dict[str, dict[str, float]]:
    """The idle watcher (no save yet) with ``spares: off`` (the warm pool) and
    ``spares: on``: its CPU and RSS, and those of the processes it keeps
    (the pool, or the spares with their pre-started workers)."""
    config = proj / "config.yaml"
    original = config.read_text()
    out: dict[str, dict[str, float]] = {}
    try:
        for setting, note in (("off", "warm start: pool"), ("on", "spare stages ready")):
            config.write_text(original + f"\nspares: {setting}\n")
            w = Watcher(proj, "candidates/", "--no-initial")
            try:
                w.wait_note(note, 240)
                time.sleep(3.0)  # every spare ready, none still importing
                pid = w.proc.pid
                kept = [c for c in _children(pid) if b"warmpool/server.py" in Path(f"/proc/{c}/cmdline").read_bytes()]
                kept += [g for c in kept for g in _children(c)]
                hz = os.sysconf("SC_CLK_TCK")
                t0, c0, k0 = time.monotonic(), _ticks(pid), sum(_ticks(k) for k in kept)
                time.sleep(seconds)
                dt = time.monotonic() - t0
                out[setting] = {
                    "cpu": (_ticks(pid) - c0) / hz / dt * 100,
                    "rss": _rss_mb(pid),
                    "kept": len(kept),
                    "kept_cpu": (sum(_ticks(k) for k in kept) - k0) / hz / dt * 100,
                    "kept_rss": sum(_rss_mb(k) for k in kept),
                }
            finally:
                w.stop()
    finally:
        config.write_text(original)
    return out


# -- (g) the loop on the stages' device ----------------------------------------------------


NOOP_DEVICE = """\
import torch

import gemswatch.gems  # noqa: F401  (what every stage imports: torch, triton, the library)


def test_noop_on_the_device():
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")  # the CUDA context a stage's first kernel needs
"""


def stage_start_modes(proj: Path, repeat: int, device: str) -> dict[str, float]:
    """Median wall time of a trivial stage that touches the device: from a
    spare, forked from the warm pool, and cold."""
    (proj / "tests" / "test_zz_noop_device.py").write_text(NOOP_DEVICE)
    cfg = load_config(proj / "config.yaml")
    env = base_env(cfg)
    slot = detect_devices().slots[0] if device == "cuda" else None
    stage_env = dict(env, **({"CUDA_VISIBLE_DEVICES": slot} if slot is not None else {}))
    spares = SpareStarter(log_path=proj / ".gemswatch" / "spares.log")
    spares.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=env,
                     slots=[slot], per_slot=1, cuda=device == "cuda")
    warm = WarmStarter(log_path=proj / ".gemswatch" / "warm.log")
    warm.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=env)
    cmd = [cfg.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_zz_noop_device.py"]
    times: dict[str, list[float]] = {"spare": [], "warm": [], "cold": []}
    try:
        for i in range(repeat + 1):  # the first round waits for the pool: not counted
            for mode, starter in (("spare", spares), ("warm", warm), ("cold", None)):
                if mode == "spare":
                    end = time.monotonic() + 180
                    while spares.ready_count(slot) < 1 and time.monotonic() < end:
                        time.sleep(0.05)  # a stage that finds its spare ready (the replacement is not timed)
                t0 = time.perf_counter()
                o = run_process(cmd, cwd=proj, env={**stage_env, "GEMSWATCH_RUN_ID": f"bench-g{i}"},
                                log_path=proj / f"start-{mode}.log", timeout=180, cancel=threading.Event(), warm=starter)
                dt = time.perf_counter() - t0
                if o.returncode != 0 or o.warm != (mode != "cold"):
                    print(f"  note: {mode} start: exit {o.returncode}, warm={o.warm}; see {proj / f'start-{mode}.log'}")
                if i:
                    times[mode].append(dt)
    finally:
        spares.shutdown()
        warm.shutdown()
        (proj / "tests" / "test_zz_noop_device.py").unlink()
    return {k: median(v) for k, v in times.items()}


def cache_entries(folders: list[Path]) -> set[str]:
    """The compiled artefacts in Triton cache folders (one subfolder per hash)."""
    return {f"{f}/{d.name}" for f in folders if f.is_dir() for d in f.iterdir() if d.is_dir()}


def triton_caches(proj: Path) -> dict[str, list[Path]]:
    """The project's Triton caches: the judge's (gems and its baselines) and
    the candidates' own (what their workers compile, one folder per file)."""
    state = proj / ".gemswatch"
    return {"judge": [state / "triton-cache"],
            "candidates": sorted((state / "candidate-caches").glob("*/triton_cache_dir"))}


_KERNEL_LINE = "    cols = tl.arange(0, BLOCK_COLS)\n"


def session_notes(proj: Path, log: str | None) -> list[str]:
    """A stage log's own account of itself (the session notes: the stage
    clock, the candidate calls' line), to see where a slow save's seconds went."""
    path = proj / log if log else None  # an absolute log stays as it is
    if path is None or not path.is_file():
        return []
    lines = path.read_text(errors="replace").splitlines()
    return [ln for ln in lines if SESSION_NOTE.match(ln)]


def changed_constant(text: str, value: int) -> str:
    """The softmax candidate with one more constant in its kernel (folded
    away by the compiler: results stay the same, the kernel's source does not)."""
    if _KERNEL_LINE not in text:
        raise SystemExit(f"{SOFTMAX}: no line {_KERNEL_LINE.strip()!r} to change a constant after")
    return text.replace(_KERNEL_LINE, _KERNEL_LINE.rstrip("\n") + f" + 0 * {value}\n", 1)


def device_loop(proj: Path, repeat: int, spares: str, pause: float) -> dict[str, dict[str, float]]:
    """One watcher, empty Triton cache: the first save after start, comment
    saves and kernel-constant saves (save -> preflight, -> correctness),
    ``pause`` seconds apart (the spares a save used are replaced meanwhile,
    as between a user's edits)."""
    for folders in triton_caches(proj).values():
        for cache in folders:
            shutil.rmtree(cache, ignore_errors=True)
    config = proj / "config.yaml"
    original_config = config.read_text()
    config.write_text(original_config + f"\nspares: {spares}\n")
    target = proj / SOFTMAX
    original = target.read_text()
    w = Watcher(proj, "candidates/", "--no-initial")
    rows: dict[str, dict[str, list[float]]] = {}
    try:
        w.wait_note("spare stages ready" if spares == "on" else "warm start: pool", 240)
        time.sleep(1.0)

        def save(label: str, text: str) -> None:
            before = {name: cache_entries(c) for name, c in triton_caches(proj).items()}
            t0 = time.monotonic()
            target.write_text(text)
            digest = sha(target)
            row = rows.setdefault(label, {"preflight": [], "correctness": [], "kernels": [], "judge kernels": []})
            for stage in ("preflight", "correctness"):
                t, e = w.wait(
                    lambda e, s=stage: e["event"] == "stage_finished" and e["stage"] == s and e["content_sha256"] == digest,
                    300, f"{stage} of {label}",
                )
                if e["status"] != "passed":
                    print(f"  note: {label} {stage}: {e['status']} {e.get('message', '')[:160]}")
                row[stage].append(t - t0)
                for line in session_notes(proj, e.get("log")):
                    print(f"    [{label}, {stage}, {t - t0:.2f} s after the save, {e.get('duration_s', 0):.2f} s in the stage] {line}")
            w.wait(lambda e: e["event"] == "run_finished" and e["content_sha256"] == digest, 60, "run_finished")
            after = {name: cache_entries(c) for name, c in triton_caches(proj).items()}  # a first save makes its folder
            row["kernels"].append(float(len(after["candidates"] - before["candidates"])))
            row["judge kernels"].append(float(len(after["judge"] - before["judge"])))
            time.sleep(pause)

        save("first save after start", original + "\n# loop benchmark: first save\n")
        for i in range(repeat):
            save("comment-only save", original + f"\n# loop benchmark: comment {i}\n")
        for i in range(repeat):
            save("kernel constant changed", changed_constant(original, i + 1))
    finally:
        w.stop()
        target.write_text(original)
        config.write_text(original_config)
    return {label: {k: median(v) for k, v in row.items()} for label, row in rows.items()}


def device_part(proj: Path, repeat: int, device: str, spares: str, pause: float) -> dict[str, float]:
    print(f"(g) the loop on the device: {device} (spares: {spares}; medians of {repeat}; saves {pause:g} s apart)", flush=True)
    g = stage_start_modes(proj, repeat, device)
    print(f"    stage start   spare {g['spare']:6.3f} s   warm {g['warm']:6.3f} s   cold {g['cold']:6.3f} s"
          f"   spare/cold {g['spare'] / g['cold']:.3f}   warm/cold {g['warm'] / g['cold']:.3f}", flush=True)
    loop = device_loop(proj, repeat, spares, pause)
    for label, row in loop.items():
        print(f"    {label:24s} save->preflight {row['preflight']:6.3f} s   save->correctness {row['correctness']:6.3f} s"
              f"   new Triton cache entries: candidate {row['kernels']:.0f}, judge {row['judge kernels']:.0f}", flush=True)
    return {
        "spare_start": g["spare"] / g["cold"],
        "unchanged": loop["comment-only save"]["correctness"],
        "changed": loop["kernel constant changed"]["correctness"],
        "comment_kernels": loop["comment-only save"]["kernels"] + loop["comment-only save"]["judge kernels"],
    }


# -- report ----------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="measurements per figure (medians are shown)")
    ap.add_argument("--only", default="abcdef", help="the parts to run, e.g. `d`, `abc` or `g` (default: abcdef)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="(g) the stages' device (default: cuda when a GPU is visible)")
    ap.add_argument("--repeat-g", type=int, default=3, help="(g) measurements per figure (default 3: it stays under ~5 minutes on a GPU)")
    ap.add_argument("--pause-g", type=float, default=8.0,
                    help="(g) seconds between a run's end and the next save (spares are replaced meanwhile; default 8)")
    ap.add_argument("--spares", choices=("on", "off", "auto"), default="on",
                    help="(g) the watcher's spares: setting (default on)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch project")
    args = ap.parse_args()
    parts = set(args.only)
    tmp = Path(tempfile.mkdtemp(prefix="gemswatch-loop-"))
    proj = scratch_copy(tmp / "project")
    print(f"loop benchmark: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, scratch project {proj}")
    load_before = _load()
    print(f"machine: load average {load_before}; parallel capacity {parallel_capacity():.2f} (2 CPU-bound processes at once)", flush=True)
    ratios: dict[str, float] = {}
    try:
        if "a" in parts:
            print("(a) stage start (median wall time of a stage through the runner)", flush=True)
            a = stage_start(proj, args.repeat)
            for name, t in a.items():
                print(f"    {name:16s} warm {t['warm']:6.3f} s   cold {t['cold']:6.3f} s   warm/cold {t['warm'] / t['cold']:.3f}", flush=True)
            ratios["start"] = a["trivial stage"]["warm"] / a["trivial stage"]["cold"]
        if "b" in parts or "e" in parts:
            print("(b) save -> verdict through `gemswatch candidates/ --json` (file write to stage_finished)", flush=True)
            b_warm, watcher = save_to_verdict(proj, args.repeat, cold=False)
            print(f"    warm   preflight {b_warm['preflight']:6.3f} s   correctness {b_warm['correctness']:6.3f} s", flush=True)
            try:
                if "e" in parts:
                    e = idle(watcher)
            finally:
                watcher.stop()
            if "e" in parts:
                print("(e) idle watcher over 10 s (after (b))")
                print(f"    watcher CPU {e['cpu']:.2f} %   RSS {e['rss']:.1f} MB   (warm pool: CPU {e['pool_cpu']:.2f} %, RSS {e['pool_rss']:.0f} MB)", flush=True)
                ratios["cpu"], ratios["rss"] = e["cpu"], e["rss"]
        if "e" in parts:
            print("(e) idle watcher before any save over 10 s: spares off (the warm pool) and on", flush=True)
            for setting, row in idle_with_spares(proj).items():
                print(f"    spares {setting:3s}  watcher CPU {row['cpu']:.2f} %   RSS {row['rss']:.1f} MB   "
                      f"({row['kept']:.0f} processes it keeps: CPU {row['kept_cpu']:.2f} %, RSS {row['kept_rss']:.0f} MB)", flush=True)
        if "b" in parts:
            b_cold, _ = save_to_verdict(proj, max(2, args.repeat // 2), cold=True)
            print(f"    --cold preflight {b_cold['preflight']:6.3f} s   correctness {b_cold['correctness']:6.3f} s", flush=True)
        if "c" in parts:
            print("(c) by hand: the preflight and correctness commands, cold, one after the other", flush=True)
            c = hand_chain(proj, max(2, args.repeat // 2))
            print(f"    preflight {c['preflight']:6.3f} s   correctness {c['correctness']:6.3f} s   chain {c['chain']:6.3f} s", flush=True)
            if "b" in parts:
                ratios["chain"] = b_warm["correctness"] / c["chain"]
                ratios["preflight"] = b_warm["preflight"] / c["preflight"]
                ratios["cold_chain"] = b_cold["correctness"] / c["chain"]
        if "d" in parts:
            print("(d) 16 files saved at once (write of the first to the last run_finished; mean of 2 rounds, A B B A)", flush=True)
            capacity = parallel_capacity()
            d = many_files(proj)
            capacity = min(capacity, parallel_capacity())
            print(f"    --jobs 1 {d[1]:6.2f} s   --jobs 2 {d[2]:6.2f} s   speed-up {d[1] / d[2]:.2f}x"
                  f"   (parallel capacity of the machine before/after: min {capacity:.2f})", flush=True)
            ratios["jobs"] = d[1] / d[2]
        if "f" in parts:
            print("(f) save -> correctness, warm: the candidate in a worker process (default) vs in the judge's", flush=True)
            f = isolation_cost(proj, args.repeat)
            print(f"    worker {f['worker']:6.3f} s   in process {f['off']:6.3f} s   ratio {f['worker'] / f['off']:.3f}", flush=True)
            ratios["isolation"] = f["worker"] / f["off"]
        if "g" in parts:
            device = args.device if args.device != "auto" else detect_devices().kind
            if device == "cpu":
                os.environ["GEMSWATCH_DEVICE"] = "cpu"  # the stages and the watcher's device detection
            ratios.update(device_part(proj, args.repeat_g, device, args.spares, args.pause_g))
    finally:
        if args.keep:
            print(f"scratch project kept in {proj}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine load average at the end: {_load()} (at the start: {load_before})")
    print()
    print("goals")
    rows = [
        ("start", "warm stage start / cold", "{:.3f}", f"<= {GOALS['start']}", lambda v: v <= GOALS["start"]),
        ("chain", "save->correctness / hand chain", "{:.3f}", f"<= {GOALS['chain']}", lambda v: v <= GOALS["chain"]),
        ("jobs", "16 files, jobs 1 time / jobs 2 time", "{:.2f}x", f">= {GOALS['jobs']}x", lambda v: v >= GOALS["jobs"]),
        ("cpu", "idle watcher CPU", "{:.2f} %", f"< {GOALS['cpu']} %", lambda v: v < GOALS["cpu"]),
        ("rss", "idle watcher RSS", "{:.1f} MB", f"< {GOALS['rss']:.0f} MB", lambda v: v < GOALS["rss"]),
        ("isolation", "save->correctness, isolated / in process", "{:.3f}", f"<= {GOALS['isolation']}", lambda v: v <= GOALS["isolation"]),
        ("spare_start", "(g) spare stage start / cold", "{:.3f}", f"<= {GOALS['spare_start']}", lambda v: v <= GOALS["spare_start"]),
        ("unchanged", "(g) save->correctness, comment only", "{:.2f} s", f"<= {GOALS['unchanged']} s", lambda v: v <= GOALS["unchanged"]),
        ("changed", "(g) save->correctness, kernel changed", "{:.2f} s", f"<= {GOALS['changed']} s", lambda v: v <= GOALS["changed"]),
        ("comment_kernels", "(g) kernels compiled by a comment save", "{:.0f}", "0", lambda v: v == 0),
    ]
    for key, label, fmt, goal, ok in rows:
        if key in ratios:
            print(f"    {label:36s} {fmt.format(ratios[key]):>10s}  (goal {goal})  {verdict(ok(ratios[key]))}")
    if "chain" in ratios:
        print(f"    (save->preflight / hand preflight {ratios['preflight']:.3f}; --cold save->correctness / hand chain {ratios['cold_chain']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
