"""End to end: the real `gemswatch` CLI on a tiny project in tmp_path.

The project needs no torch: its operator library (``fakeops``) is plain
Python, ``tests/`` loads the real correctness plugin with
``--override-module fakeops``, and ``benchmark/`` carries a small harness
that honours the protocol options. Every wait has an explicit bound.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _e2e_helpers import write_files

PY = sys.executable

FILES = {
    "pytest.ini": """\
        [pytest]
        addopts = -p no:cacheprovider --override-module fakeops
        markers =
            softmax: softmax tests
            double: double tests
            skipall: tests that always skip
        """,
    "fakeops.py": '''\
        """A tiny operator library in plain Python."""
        import math


        def softmax(xs):
            m = max(xs)
            e = [math.exp(x - m) for x in xs]
            s = sum(e)
            return [v / s for v in e]


        def double(xs):
            return [2 * x for x in xs]
        ''',
    "tests/conftest.py": """\
        pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]
        """,
    "tests/test_ops.py": """\
        import math

        import pytest

        import fakeops


        @pytest.mark.softmax
        @pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [0.5], [-1.0, 5.0]])
        def test_softmax(xs):
            m = max(xs)
            ref = [math.exp(x - m) for x in xs]
            ref = [r / sum(ref) for r in ref]
            out = fakeops.softmax(xs)
            err = max(abs(a - b) for a, b in zip(out, ref))
            assert err < 1e-9, f"max abs error {err:.3g}"


        @pytest.mark.double
        def test_double():
            assert fakeops.double([1, 2]) == [2, 4]


        @pytest.mark.skipall
        def test_needs_a_gpu():
            pytest.skip("needs a GPU")
        """,
    "benchmark/conftest.py": '''\
        """A minimal harness honouring --override, --level, --preflight-only, --record json."""
        import importlib
        import importlib.util
        import json
        import os
        import time

        import pytest


        def pytest_addoption(parser):
            g = parser.getgroup("fake benchmark")
            g.addoption("--override", action="append", default=[])
            g.addoption("--override-module", default="fakeops")
            g.addoption("--record", default="none")
            g.addoption("--output", default=None)
            g.addoption("--level", default="comprehensive")
            g.addoption("--preflight-only", action="store_true")


        def pytest_configure(config):
            mod = importlib.import_module(config.option.override_module)
            config.fake = {"mod": mod, "calls": {}, "records": [], "benchmarks": [], "orig": {}, "ops": set()}
            for spec in config.option.override:
                op, rest = spec.split(":", 1)
                path, func = rest.rsplit(":", 1)
                try:
                    s = importlib.util.spec_from_file_location("candidate_" + op, path)
                    m = importlib.util.module_from_spec(s)
                    s.loader.exec_module(m)
                    fn = getattr(m, func)
                except Exception as e:
                    raise pytest.UsageError(f"--override: cannot load {path}: {type(e).__name__}: {e}")

                def wrapper(*a, _fn=fn, _op=op, **k):
                    config.fake["calls"][_op] = config.fake["calls"].get(_op, 0) + 1
                    return _fn(*a, **k)

                config.fake["orig"][op] = getattr(mod, op, None)
                config.fake["ops"].add(op)
                setattr(mod, op, wrapper)


        @pytest.fixture
        def bench(request):
            cfg = request.config
            f = cfg.fake

            def run(op, cases):
                fn = getattr(f["mod"], op)
                if cfg.option.preflight_only:
                    for i, case in enumerate(cases):
                        before = f["calls"].get(op, 0)
                        rec = {"operator": op, "nodeid": request.node.nodeid, "case_id": f"{request.node.nodeid}::{i}",
                               "override": op in f["ops"], "count": 0, "status": "failed"}
                        f["records"].append(rec)
                        try:
                            fn(case)
                        except Exception as e:
                            rec["error"] = f"{type(e).__name__}: {e}"
                            raise
                        rec["count"] = f["calls"].get(op, 0) - before
                        rec["status"] = "passed"
                    return
                out = []
                for i, case in enumerate(cases):
                    t0 = time.perf_counter(); f["orig"].get(op, fn)(case); base = time.perf_counter() - t0
                    before = f["calls"].get(op, 0)
                    t0 = time.perf_counter(); fn(case); lat = time.perf_counter() - t0
                    source = "override" if f["calls"].get(op, 0) > before else None
                    out.append({"case_id": str(i), "latency_base": base, "latency": lat,
                                "speedup": (base + 1e-7) / (lat + 1e-7), "candidate_source": source, "error": None})
                f["benchmarks"].append({"operator": op, "nodeid": request.node.nodeid, "cases": out})

            return run


        def pytest_sessionfinish(session, exitstatus):
            cfg = session.config
            f = cfg.fake
            if cfg.option.preflight_only:
                report = {"schema_version": "flaggems.preflight/v1", "records": f["records"]}
                if session.exitstatus == 0 and (not f["records"] or any(r["status"] != "passed" for r in f["records"])):
                    session.exitstatus = 1
            else:
                report = {"schema_version": "gemswatch.benchmark/v1", "device": "cpu", "interpreted": True,
                          "level": cfg.option.level, "benchmarks": f["benchmarks"], "operators": {}}
            if cfg.option.record == "json" and cfg.option.output:
                tmp = cfg.option.output + ".tmp"
                with open(tmp, "w") as fh:
                    json.dump(report, fh)
                os.replace(tmp, cfg.option.output)
        ''',
    "benchmark/test_perf.py": """\
        def test_softmax(bench):
            bench("softmax", [[1.0, 2.0, 3.0], [0.0] * 100])


        def test_double(bench):
            bench("double", [[1, 2, 3]])
        """,
    "cands/good.py": """\
        import math


        def my_softmax(xs):
            m = max(xs)
            e = [math.exp(x - m) for x in xs]
            s = sum(e)
            return [v / s for v in e]
        """,
    "cands/syntax.py": """\
        def my_softmax(xs):
            return [x for x in xs
        """,
    "cands/wrong.py": """\
        def my_softmax(xs):
            return [1.0 / len(xs)] * len(xs)
        """,
    "cands/crash.py": """\
        import os


        def my_softmax(xs):
            os.abort()
        """,
    "cands/hang.py": """\
        import time


        def my_softmax(xs):
            time.sleep(600)
        """,
    "cands/ghost.py": """\
        def my_softmax(xs):
            return xs
        """,
    "cands/skipper.py": """\
        def triple(xs):
            return [3 * x for x in xs]
        """,
}

CONFIG = """\
watch: cands
benchmark: manual
jobs: 4
grace: 1
timeouts:
  preflight: 4
  correctness: 20
candidates:
  good.py: {softmax: my_softmax}
  syntax.py: {softmax: my_softmax}
  wrong.py: {softmax: my_softmax}
  crash.py: {softmax: my_softmax}
  hang.py: {softmax: my_softmax}
  ghost.py: {ghost: my_softmax}
  skipper.py: {triple: triple}
operators:
  softmax:
    tests: tests/test_ops.py
    benchmark: benchmark/test_perf.py::test_softmax
  double:
    tests: tests/test_ops.py
    benchmark: benchmark/test_perf.py::test_double
  ghost:
    tests: tests/test_ops.py
    marker: double
  triple:
    tests: tests/test_ops.py
    marker: skipall
"""


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    write_files(tmp_path, FILES)
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def gemswatch(proj: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "gemswatch.watch", *args],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "GEMSWATCH_DEVICE": "cpu"},
    )


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def finished(evs, **match):
    return [e for e in evs if e["event"] == "stage_finished" and all(e.get(k) == v for k, v in match.items())]


def stray_processes(proj: Path) -> list[str]:
    """Processes whose command line mentions the project's run folder."""
    marker = str(proj / ".gemswatch")
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (d / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(f"{d.name}: {cmd}")
    return out


def test_run_good_candidate_exits_0_and_records_history(proj):
    r = gemswatch(proj, "run", "cands/good.py", "--json")
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    assert [e["event"] for e in evs] == [
        "run_queued", "stage_started", "stage_finished", "stage_started", "stage_finished", "run_finished",
    ]
    pre, cor = finished(evs)
    assert (pre["stage"], pre["status"]) == ("preflight", "passed")
    assert pre["cases"] == {"passed": 2, "failed": 0, "skipped": 0, "total": 2} and pre["candidate_calls"] == {"softmax": 2}
    assert (cor["stage"], cor["status"]) == ("correctness", "passed")
    assert cor["cases"]["passed"] == 3 and cor["candidate_calls"]["softmax"] >= 3
    for key in ("run_id", "candidate", "content_sha256", "operators", "stage", "status", "exit_code", "duration_s",
                "cases", "candidate_calls", "speedup", "report", "log", "message"):
        assert key in cor
    assert cor["candidate"] == "cands/good.py" and cor["operators"] == ["softmax"]
    run_dir = proj / ".gemswatch" / "runs" / cor["run_id"]
    assert (run_dir / "correctness.cmd").read_text().startswith(PY)
    assert (run_dir / "snapshot" / "good.py").read_text() == (proj / "cands" / "good.py").read_text()
    history = [json.loads(x) for x in (proj / ".gemswatch" / "history.jsonl").read_text().splitlines()]
    assert [h["stage"] for h in history if h["event"] == "stage_finished"] == ["preflight", "correctness"]


def test_run_classifies_broken_candidates(proj):
    start = time.monotonic()
    r = gemswatch(
        proj, "run", "--json",
        "cands/syntax.py", "cands/wrong.py", "cands/crash.py", "cands/hang.py", "cands/ghost.py", "cands/skipper.py",
    )
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - start < 45
    evs = events(r.stdout)
    runs = {e["candidate"]: e for e in evs if e["event"] == "run_finished"}
    assert {k: v["status"] for k, v in runs.items()} == {
        "cands/syntax.py": "error",
        "cands/wrong.py": "failed",
        "cands/crash.py": "crashed",
        "cands/hang.py": "timeout",
        "cands/ghost.py": "uncalled",
        "cands/skipper.py": "all_skipped",
    }
    (syn,) = finished(evs, candidate="cands/syntax.py", stage="preflight")
    assert "cands/syntax.py" in syn["message"] and ".gemswatch" not in syn["message"]
    assert finished(evs, candidate="cands/syntax.py", stage="correctness")[0]["status"] == "not_run"
    (wrong,) = finished(evs, candidate="cands/wrong.py", stage="correctness")
    assert wrong["message"].startswith("tests/test_ops.py::test_softmax[") and "max abs error" in wrong["message"]
    (crash,) = finished(evs, candidate="cands/crash.py", stage="preflight")
    assert "SIGABRT" in crash["message"]
    (hang,) = finished(evs, candidate="cands/hang.py", stage="preflight")
    assert hang["status"] == "timeout" and hang["duration_s"] < 10
    (ghost,) = finished(evs, candidate="cands/ghost.py", stage="correctness")
    assert "ghost" in ghost["message"]
    assert finished(evs, candidate="cands/ghost.py", stage="preflight")[0]["status"] == "not_run"  # no benchmark selection
    assert not stray_processes(proj)
    # an all-skipped correctness passes only when asked to
    assert gemswatch(proj, "run", "cands/skipper.py", "--plain").returncode == 1
    assert gemswatch(proj, "run", "cands/skipper.py", "--plain", "--allow-skipped").returncode == 0


def test_run_usage_and_config_errors_exit_2(proj):
    (proj / "cands" / "loose.py").write_text("")
    r = gemswatch(proj, "run", "cands/loose.py")
    assert r.returncode == 2 and "is not mapped" in r.stderr
    assert gemswatch(proj, "run", "cands/nope.py").returncode == 2
    r = gemswatch(proj, "run", "tests")  # a folder without candidates: one line that says so
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("gemswatch run: tests holds no mapped candidate")
    (proj / "config.yaml").write_text(CONFIG.replace("jobs: 4", "jobs: lots"))
    r = gemswatch(proj, "run", "--json")
    assert r.returncode == 2
    assert r.stderr.strip() == "config.yaml:3: jobs: expected auto or a positive integer, got 'lots'; write `jobs: auto` or `jobs: 2`"
    assert events(r.stdout)[0]["event"] == "config_error"
    assert gemswatch(proj, "run", "--jobs", "0").returncode == 2


def test_benchmark_auto_reports_speedup(proj):
    r = gemswatch(proj, "run", "cands/good.py", "--json", "--benchmark", "auto")
    assert r.returncode == 0, r.stderr + r.stdout
    (b,) = finished(events(r.stdout), stage="benchmark")
    assert b["status"] == "passed" and b["speedup"] > 0 and b["speedups"]["softmax"] > 0


def test_watcher_never_imports_torch(proj):
    code = (
        "import sys\n"
        "from gemswatch.watch.cli import main\n"
        "rc = main(['run', 'cands/good.py', '--plain'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'numpy') or m.startswith('gemswatch.gems'))\n"
        "print('BAD', bad)\n"
        "sys.exit(rc)\n"
    )
    r = subprocess.run([PY, "-c", code], cwd=proj, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "BAD []" in r.stdout


def test_list_and_history_and_help(proj):
    r = gemswatch(proj, "list", "-v")
    assert r.returncode == 0
    assert "cands/good.py" in r.stdout and "softmax -> my_softmax" in r.stdout
    assert "--preflight-only --override softmax:" in r.stdout
    gemswatch(proj, "run", "cands/good.py", "--plain", "--benchmark", "auto")
    h = gemswatch(proj, "history", "softmax")
    assert h.returncode == 0 and "leaderboard" in h.stdout and "cands/good.py" in h.stdout
    assert "examples:" in gemswatch(proj, "--help").stdout
    gemswatch(proj, "run", "cands/good.py", "--plain")
    one = gemswatch(proj, "history", "--json", "--limit", "1")  # the latest save only
    assert one.returncode == 0 and len({json.loads(x)["run_id"] for x in one.stdout.splitlines()}) == 1
    missing = gemswatch(proj, "history", "nosuchop")
    assert missing.returncode == 2 and "nothing in" in missing.stderr and "'nosuchop'" in missing.stderr
    piped = subprocess.run(f"{PY} -m gemswatch.watch history --json | head -n 1", shell=True, cwd=proj,
                           capture_output=True, text=True, timeout=60)
    assert piped.stdout.count("\n") == 1 and "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr


class Watcher:
    """`gemswatch --json` as a child process, its events collected by a thread."""

    def __init__(self, proj: Path, *args: str):
        self.proc = subprocess.Popen(
            [PY, "-m", "gemswatch.watch", "--json", *args],
            cwd=proj,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "GEMSWATCH_DEVICE": "cpu"},
        )
        self.events: list[dict] = []
        self.stderr = ""
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.strip():
                self.events.append(json.loads(line))

    def wait(self, pred, timeout: float, what: str):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            hit = [e for e in list(self.events) if pred(e)]
            if hit:
                return hit[-1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; events: {[(e['event'], e.get('candidate'), e.get('status')) for e in self.events]}")

    def run_finished(self, cand: str, sha: str, timeout: float = 25):
        return self.wait(
            lambda e: e["event"] == "run_finished" and e["candidate"] == cand and e["content_sha256"] == sha,
            timeout,
            f"run_finished of {cand} {sha[:8]}",
        )

    def stop(self, timeout: float = 20) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        self._t.join(5)
        self.stderr = self.proc.stderr.read()
        return rc


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_watch_loop_end_to_end(proj):
    cfg = proj / "config.yaml"
    # watch only good.py and ghost.py for this session
    cfg.write_text(
        CONFIG.replace("  syntax.py: {softmax: my_softmax}\n", "")
        .replace("  wrong.py: {softmax: my_softmax}\n", "")
        .replace("  crash.py: {softmax: my_softmax}\n", "")
        .replace("  hang.py: {softmax: my_softmax}\n", "")
        .replace("  skipper.py: {triple: triple}\n", "")
    )
    for name in ("syntax", "wrong", "crash", "hang", "skipper"):
        (proj / "cands" / f"{name}.py").rename(proj / f"{name}.py.keep")
    good = proj / "cands" / "good.py"
    original = good.read_text()
    w = Watcher(proj)
    try:
        w.wait(lambda e: e["event"] == "watch_started", 15, "watch_started")
        assert w.run_finished("cands/good.py", sha(good))["status"] == "passed"
        assert w.run_finished("cands/ghost.py", sha(proj / "cands" / "ghost.py"))["status"] == "uncalled"

        # 1. an in-place save with a wrong result
        good.write_text((proj / "wrong.py.keep").read_text())
        r = w.run_finished("cands/good.py", sha(good))
        assert r["status"] == "failed"

        # 2. an atomic save (temp file renamed over the target) with a syntax error
        tmp = proj / "cands" / ".good.py.tmp"
        tmp.write_text((proj / "syntax.py.keep").read_text())
        os.replace(tmp, good)
        r = w.run_finished("cands/good.py", sha(good))
        assert r["status"] == "error"
        err = [e for e in finished(w.events, run_id=r["run_id"]) if e["status"] == "error"][0]
        assert "cands/good.py" in err["message"]

        # 3. editor noise never triggers: swap files, vim's 4913 probe, backups
        for junk in (".good.py.swp", "4913", "good.py~", ".#good.py"):
            (proj / "cands" / junk).write_text("x")
        (proj / "cands" / "__pycache__").mkdir(exist_ok=True)
        (proj / "cands" / "__pycache__" / "good.cpython-311.pyc").write_bytes(b"\0")

        # 4. a burst of saves: the final bytes get the final verdict
        for i in range(5):
            good.write_text(original + f"\n# burst {i}\n")
            time.sleep(0.02)
        final = sha(good)
        assert w.run_finished("cands/good.py", final)["status"] == "passed"
        n_runs = len([e for e in w.events if e["event"] == "run_queued"])

        # 5. an unchanged re-save does not re-run
        good.write_bytes(good.read_bytes())
        time.sleep(1.0)
        assert len([e for e in w.events if e["event"] == "run_queued"]) == n_runs

        # 6. a bad config edit keeps the last good config; a good one applies
        text = cfg.read_text()
        cfg.write_text(text.replace("benchmark: manual", "benchmark: maybe"))
        ce = w.wait(lambda e: e["event"] == "config_error", 10, "config_error")
        assert ce["kept_last_good"] and ce["errors"][0]["key"] == "benchmark" and ce["errors"][0]["line"] == 2
        cfg.write_text(text.replace("ghost.py: {ghost: my_softmax}", "ghost.py: {softmax: my_softmax}"))
        ghost = proj / "cands" / "ghost.py"
        ghost.write_text(original)
        assert w.run_finished("cands/ghost.py", sha(ghost))["status"] == "passed"

        # 7. a new unmapped file is only a note on stderr
        (proj / "cands" / "scratch.py").write_text("x = 1\n")
        time.sleep(0.5)
    finally:
        rc = w.stop()
    assert rc == 0, w.stderr
    assert w.events[-1]["event"] == "watch_stopped"
    assert "cands/scratch.py is not mapped" in w.stderr
    # no run of the noise files, no duplicate concurrent runs
    assert {e["candidate"] for e in w.events if e["event"] == "run_queued"} == {"cands/good.py", "cands/ghost.py"}
    # every stage finished on stdout is in the history file
    history = [json.loads(x) for x in (proj / ".gemswatch" / "history.jsonl").read_text().splitlines()]
    seen = {(e["run_id"], e["stage"]) for e in finished(w.events)}
    assert seen <= {(h["run_id"], h["stage"]) for h in history if h["event"] == "stage_finished"}
    assert not stray_processes(proj)


def test_watch_ctrl_c_stops_a_hanging_stage(proj):
    w = Watcher(proj, "--jobs", "2")
    try:
        w.wait(lambda e: e["event"] == "stage_started" and e["candidate"] == "cands/hang.py", 15, "hang started")
        time.sleep(0.3)
    finally:
        start = time.monotonic()
        rc = w.stop()
    assert rc == 0 and time.monotonic() - start < 10
    assert not stray_processes(proj)
    hang = [e for e in finished(w.events, candidate="cands/hang.py")]
    assert hang and hang[-1]["status"] == "superseded"


def test_dashboard_in_a_terminal_takes_keys(proj):
    """The rich dashboard in a pseudo-terminal, on the alternate screen: `b`
    benchmarks, `o` shows the log in $PAGER (the screen steps aside and
    comes back), `q` quits and gives the shell its screen back."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    for name in ("syntax", "wrong", "crash", "hang", "ghost", "skipper"):
        (proj / "cands" / f"{name}.py").unlink()
    cfg = proj / "config.yaml"
    cfg.write_text("\n".join(ln for ln in CONFIG.splitlines() if not any(
        f"  {n}.py:" in ln for n in ("syntax", "wrong", "crash", "hang", "ghost", "skipper"))) + "\n")
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(proj)
        os.environ["GEMSWATCH_DEVICE"] = "cpu"
        # a pager that copies the log it is given
        os.environ["PAGER"] = f"{PY} -c \"import shutil, sys; shutil.copy(sys.argv[1], 'paged.log')\""
        os.execv(PY, [PY, "-m", "gemswatch.watch", "--svg", str(proj / "dash.svg")])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    out = bytearray()
    history = proj / ".gemswatch" / "history.jsonl"

    def pump_until(pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    out.extend(os.read(fd, 65536))
                except OSError:
                    return pred()
            if pred():
                return True
        return False

    def stages():
        if not history.exists():
            return []
        return [json.loads(x)["stage"] for x in history.read_text().splitlines() if '"stage_finished"' in x]

    try:
        assert pump_until(lambda: stages() == ["preflight", "correctness"], 30), out.decode(errors="replace")[-2000:]
        os.write(fd, b"b")
        assert pump_until(lambda: "benchmark" in stages(), 30)
        os.write(fd, b"jo")  # select the file, open its latest stage's log
        assert pump_until(lambda: (proj / "paged.log").exists() and out.count(b"\x1b[?1049h") == 2, 20)
        os.write(fd, b"q")
        assert pump_until(lambda: b"gemswatch summary" in out, 20)
    finally:
        status = None
        end = time.monotonic() + 15
        while status is None and time.monotonic() < end:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
            else:
                time.sleep(0.05)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None and os.waitstatus_to_exitcode(status) == 0
    text = out.decode(errors="replace")
    assert "gemswatch" in text and "good.py" in text and "passed" in text
    assert text.count("\x1b[?1049h") == text.count("\x1b[?1049l") == 2  # left for the pager, and at the end
    assert text.index("gemswatch summary") > text.rindex("\x1b[?1049l")  # printed on the shell's screen
    last = [json.loads(x) for x in history.read_text().splitlines() if '"stage_finished"' in x][-1]
    assert (proj / "paged.log").read_bytes() == Path(last["log"]).read_bytes()  # the benchmark's log
    assert (proj / "dash.svg").read_text().startswith("<svg")
    assert not stray_processes(proj)
