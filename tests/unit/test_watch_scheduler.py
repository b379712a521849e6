"""Scheduling policy with fake stages: gating, supersede, jobs, device exclusivity."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gemswatch.watch.mapping import Candidate
from gemswatch.watch.stage import Run, StageResult
from gemswatch.watch.scheduler import Scheduler
from _fake_stages import FunctionStages
from gemswatch.watch.status import ALL_SKIPPED, FAILED, NOT_RUN, PASSED, SUPERSEDED

TIMEOUT = 10.0


class Recorder:
    def __init__(self):
        self.events: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, event, **fields):
        with self.lock:
            self.events.append({"event": event, **fields})

    def of(self, event, **match):
        with self.lock:
            return [e for e in self.events if e["event"] == event and all(e.get(k) == v for k, v in match.items())]


_seq = [0]


def make_run(name: str, stages=("preflight", "correctness"), sha="s" * 64) -> Run:
    _seq[0] += 1
    cand = Candidate(Path(f"/p/{name}.py"), f"{name}.py", (("softmax", "f"),), f"{name}.py")
    return Run(
        run_id=f"{name}-{_seq[0]}",
        candidate=cand,
        sha256=sha,
        stages=list(stages),
        run_dir=Path("/nonexistent"),
        snapshot=Path("/nonexistent/x.py"),
        config=None,  # the scheduler never looks at it
        seq=_seq[0],
    )


class FakeStages:
    """execute(): statuses from a table; optionally block until released or cancelled."""

    def __init__(self, statuses=None, block=False, duration=0.0):
        self.statuses = statuses or {}
        self.block = block
        self.duration = duration
        self.release = threading.Event()
        self.running = 0
        self.max_running = 0
        self.log: list[tuple[str, str, str, object]] = []  # (what, run_id, stage, device)
        self.lock = threading.Lock()
        self.started = threading.Semaphore(0)

    def __call__(self, run, stage, device):
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.log.append(("start", run.run_id, stage, device))
        self.started.release()
        try:
            if self.block:
                while not (self.release.is_set() or run.cancel.is_set()):
                    time.sleep(0.005)
            elif self.duration:
                time.sleep(self.duration)
            if run.cancel.is_set():
                return StageResult(stage, SUPERSEDED, message=run.cancel_reason)
            return StageResult(stage, self.statuses.get(stage, PASSED))
        finally:
            with self.lock:
                self.running -= 1
                self.log.append(("end", run.run_id, stage, device))


def test_passing_run_emits_every_stage_in_order():
    rec, fake = Recorder(), FakeStages()
    s = Scheduler(FunctionStages(fake), rec, jobs=1)
    r = make_run("a")
    s.submit(r)
    assert s.wait_idle(TIMEOUT)
    kinds = [(e["event"], e.get("stage")) for e in rec.events]
    assert kinds == [
        ("run_queued", None),
        ("stage_started", "preflight"),
        ("stage_finished", "preflight"),
        ("stage_started", "correctness"),
        ("stage_finished", "correctness"),
        ("run_finished", None),
    ]
    assert rec.of("run_finished")[0]["status"] == PASSED
    s.stop()


def test_failed_stage_gates_the_rest():
    rec = Recorder()
    s = Scheduler(FunctionStages(FakeStages({"preflight": FAILED})), rec, jobs=1)
    s.submit(make_run("a", ("preflight", "correctness", "benchmark")))
    assert s.wait_idle(TIMEOUT)
    fin = {e["stage"]: e["status"] for e in rec.of("stage_finished")}
    assert fin == {"preflight": FAILED, "correctness": NOT_RUN, "benchmark": NOT_RUN}
    assert not rec.of("stage_started", stage="correctness")
    assert rec.of("run_finished")[0]["status"] == FAILED
    s.stop()


def test_all_skipped_does_not_gate_the_benchmark():
    rec = Recorder()
    s = Scheduler(FunctionStages(FakeStages({"correctness": ALL_SKIPPED})), rec, jobs=1)
    s.submit(make_run("a", ("preflight", "correctness", "benchmark")))
    assert s.wait_idle(TIMEOUT)
    assert rec.of("stage_finished", stage="benchmark")[0]["status"] == PASSED
    assert rec.of("run_finished")[0]["status"] == ALL_SKIPPED
    s.stop()


def test_new_save_supersedes_the_running_one_and_waits_for_it():
    rec, fake = Recorder(), FakeStages(block=True)
    s = Scheduler(FunctionStages(fake), rec, jobs=2)
    r1 = make_run("a", sha="1" * 64)
    s.submit(r1)
    assert fake.started.acquire(timeout=TIMEOUT)
    r2 = make_run("a", sha="2" * 64)
    s.submit(r2)
    assert fake.started.acquire(timeout=TIMEOUT)  # r2's preflight started
    fake.release.set()
    assert s.wait_idle(TIMEOUT)
    assert r1.cancel.is_set()
    assert rec.of("stage_finished", run_id=r1.run_id)[0]["status"] == SUPERSEDED
    assert rec.of("run_finished", run_id=r1.run_id)[0]["status"] == SUPERSEDED
    assert "superseded by a newer save (22222222)" in rec.of("run_finished", run_id=r1.run_id)[0]["message"]
    assert rec.of("run_finished", run_id=r2.run_id)[0]["status"] == PASSED
    # the old stage ended before the new one started: never two at once for one file
    log = [(w, rid) for w, rid, _, _ in fake.log]
    assert log.index(("end", r1.run_id)) < log.index(("start", r2.run_id))
    s.stop()


def test_queued_run_superseded_before_it_starts():
    rec, fake = Recorder(), FakeStages(block=True)
    s = Scheduler(FunctionStages(fake), rec, jobs=1)
    a = make_run("a")
    s.submit(a)
    assert fake.started.acquire(timeout=TIMEOUT)
    b1, b2 = make_run("b"), make_run("b")
    s.submit(b1)
    s.submit(b2)
    fake.release.set()
    assert s.wait_idle(TIMEOUT)
    assert not rec.of("stage_started", run_id=b1.run_id)
    assert rec.of("run_finished", run_id=b1.run_id)[0]["status"] == SUPERSEDED
    assert rec.of("run_finished", run_id=b2.run_id)[0]["status"] == PASSED
    s.stop()


def test_jobs_limit_concurrency():
    fake = FakeStages(duration=0.05)
    s = Scheduler(FunctionStages(fake), Recorder(), jobs=2, exclusive_stages=frozenset())
    for n in "abcdef":
        s.submit(make_run(n))
    assert s.wait_idle(TIMEOUT)
    assert fake.max_running == 2
    s.stop()


def test_benchmark_owns_its_device():
    fake = FakeStages(duration=0.03)
    s = Scheduler(FunctionStages(fake), Recorder(), jobs=3, devices=[None])
    for n in "abcd":
        s.submit(make_run(n, ("preflight", "benchmark")))
    assert s.wait_idle(TIMEOUT)
    # replay the log: while a benchmark runs, nothing else does
    running: set[tuple[str, str]] = set()
    for what, rid, stage, _ in fake.log:
        if what == "start":
            running.add((rid, stage))
            if any(st == "benchmark" for _, st in running):
                assert len(running) == 1, running
        else:
            running.discard((rid, stage))
    assert fake.max_running > 1  # preflights did share
    s.stop()


def test_gpu_slots_spread_stages():
    fake = FakeStages(block=True)
    s = Scheduler(FunctionStages(fake), Recorder(), jobs=2, devices=["0", "1"])
    s.submit(make_run("a"))
    s.submit(make_run("b"))
    assert fake.started.acquire(timeout=TIMEOUT) and fake.started.acquire(timeout=TIMEOUT)
    assert sorted(d for w, _, _, d in fake.log if w == "start") == ["0", "1"]
    fake.release.set()
    assert s.wait_idle(TIMEOUT)
    s.stop()


def test_stop_cancels_everything():
    rec, fake = Recorder(), FakeStages(block=True)
    s = Scheduler(FunctionStages(fake), rec, jobs=1)
    a, b = make_run("a"), make_run("b")
    s.submit(a)
    s.submit(b)
    assert fake.started.acquire(timeout=TIMEOUT)
    s.stop(reason="gemswatch stopped")
    assert a.cancel.is_set() and b.cancel.is_set()
    assert {e["run_id"] for e in rec.of("run_finished", status=SUPERSEDED)} == {a.run_id, b.run_id}


def test_internal_error_of_a_stage_does_not_kill_the_worker():
    calls = []

    def execute(run, stage, device):
        calls.append(stage)
        if len(calls) == 1:
            raise RuntimeError("bug")
        return StageResult(stage, PASSED)

    rec = Recorder()
    s = Scheduler(FunctionStages(execute), rec, jobs=1)
    s.submit(make_run("a"))
    s.submit(make_run("b"))
    assert s.wait_idle(TIMEOUT)
    assert rec.of("run_finished", status="crashed") and rec.of("run_finished", status=PASSED)
    s.stop()


def test_set_jobs_grows_and_shrinks():
    fake = FakeStages(duration=0.02)
    s = Scheduler(FunctionStages(fake), Recorder(), jobs=1, exclusive_stages=frozenset())
    s.set_jobs(3)
    for n in "abcdef":
        s.submit(make_run(n))
    assert s.wait_idle(TIMEOUT)
    assert fake.max_running == 3
    s.set_jobs(1)
    fake.max_running = 0
    for n in "ghij":
        s.submit(make_run(n))
    assert s.wait_idle(TIMEOUT)
    assert fake.max_running == 1
    s.stop()


def _spans(log):
    """(start index, end index, stage, device) of every stage in a FakeStages log."""
    open_at, spans = {}, []
    for i, (what, rid, stage, device) in enumerate(log):
        if what == "start":
            open_at[(rid, stage)] = (i, device)
        else:
            start, dev = open_at.pop((rid, stage))
            spans.append((start, i, stage, dev))
    return spans


def test_two_gpus_eight_files_share_checks_and_keep_benchmarks_exclusive():
    # The multi-GPU policy on a simulated device list: 8 files saved at once,
    # --jobs 2, two GPUs, every run preflight -> correctness -> benchmark.
    fake = FakeStages(duration=0.02)
    s = Scheduler(FunctionStages(fake), Recorder(), jobs=2, devices=["0", "1"])
    for n in range(8):
        s.submit(make_run(f"f{n}", ("preflight", "correctness", "benchmark")))
    assert s.wait_idle(TIMEOUT)
    s.stop()
    spans = _spans(fake.log)
    assert len(spans) == 24 and all(d in ("0", "1") for *_, d in spans)  # exactly one GPU each
    checks = [sp for sp in spans if sp[2] != "benchmark"]
    # Checks ran on both GPUs at the same time...
    assert any(a[3] != b[3] and a[0] < b[1] and b[0] < a[1] for a in checks for b in checks)
    # ...and nothing ran on a GPU while a benchmark held it.
    for bench in (sp for sp in spans if sp[2] == "benchmark"):
        for other in spans:
            if other is not bench and other[3] == bench[3]:
                assert not (other[0] < bench[1] and bench[0] < other[1]), (bench, other)
