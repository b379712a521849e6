"""Warm start's pure parts: the config keys, the dashboard's line, and the
scheduler's throughput rules (a superseded stage frees its slot at once;
runs are served in save order)."""

from __future__ import annotations

import threading
import time

from _fake_stages import FunctionStages
from test_watch_config import GOOD, errors, project
from test_watch_dashboard import screen
from test_watch_scheduler import Recorder, make_run

from gemswatch.watch.config import load_config
from gemswatch.watch.dashboard import DashboardState, render
from gemswatch.watch.scheduler import Scheduler
from gemswatch.watch.stage import StageResult
from gemswatch.watch.status import PASSED, SUPERSEDED

TIMEOUT = 10.0

# -- config.yaml ---------------------------------------------------------------


def test_preload_defaults_to_the_operator_library_then_torch_triton_pytest(tmp_path):
    cfg = load_config(project(tmp_path, GOOD))
    assert cfg.warm is True
    assert cfg.preload == ("gemswatch.gems", "torch", "triton", "pytest")
    cfg = load_config(project(tmp_path, GOOD + "module: flag_gems\n"))
    assert cfg.preload == ("flag_gems", "torch", "triton", "pytest")


def test_preload_and_warm_keys(tmp_path):
    cfg = load_config(project(tmp_path, GOOD + "warm: false\npreload: [torch, my_pkg.ops]\n"))
    assert cfg.warm is False and cfg.preload == ("torch", "my_pkg.ops")
    assert load_config(project(tmp_path, GOOD + "preload: []\n")).preload == ()


def test_preload_and_warm_errors_name_the_line_and_the_fix(tmp_path):
    (line,) = errors(tmp_path, GOOD + "warm: maybe\n")
    assert line == "config.yaml:15: warm: expected true or false, got 'maybe'; write `warm: true` or `warm: false`"
    (line,) = errors(tmp_path, GOOD + "preload: torch\n")
    assert line.startswith("config.yaml:15: preload: expected a list of module names; write `preload: [")
    lines = errors(tmp_path, GOOD + "preload:\n  - torch\n  - not a module\n  - torch\n")
    assert lines == [
        "config.yaml:17: preload[1]: 'not a module' is not a module name; write dotted module names, e.g. torch or gemswatch.gems",
        "config.yaml:18: preload[2]: torch is listed twice; list each module once",
    ]


def test_triton_before_the_library_is_a_warning(tmp_path):
    cfg = load_config(project(tmp_path, GOOD + "preload: [torch, triton, gemswatch.gems]\n"))
    assert [w.key for w in cfg.warnings] == ["preload"]
    assert "list gemswatch.gems before triton" in str(cfg.warnings[0])


# -- the dashboard --------------------------------------------------------------


def test_dashboard_says_whether_stages_start_warm_or_cold():
    st = DashboardState(watch="candidates/", project="/p", device="cpu", jobs=2)
    assert "warm" not in screen(render(st)) and "cold" not in screen(render(st))
    st.warm = "warm: pool 123 ready (1.4 s to preload gemswatch.gems, torch, triton, pytest)"
    assert "warm: pool 123 ready" in screen(render(st))
    st.warm = "cold: preload torch: ModuleNotFoundError: No module named 'torch'"
    assert "cold: preload torch" in screen(render(st))


# -- the scheduler --------------------------------------------------------------------


class SlowToDie:
    """Stages that block until released; a cancelled one takes ``dying`` s to end."""

    def __init__(self, dying: float):
        self.dying = dying
        self.release = threading.Event()
        self.log: list[tuple[str, str, str, float]] = []
        self.lock = threading.Lock()

    def __call__(self, run, stage, device):
        with self.lock:
            self.log.append(("start", run.run_id, stage, time.monotonic()))
        while not (self.release.is_set() or run.cancel.is_set()):
            time.sleep(0.005)
        if run.cancel.is_set():
            time.sleep(self.dying)  # SIGINT, grace, SIGKILL
        with self.lock:
            self.log.append(("end", run.run_id, stage, time.monotonic()))
        return StageResult(stage, SUPERSEDED if run.cancel.is_set() else PASSED)

    def when(self, what: str, run_id: str) -> float:
        return next(t for w, r, _, t in self.log if (w, r) == (what, run_id))


def test_a_superseded_stage_frees_its_slot_at_once():
    fake = SlowToDie(dying=1.0)
    rec = Recorder()
    s = Scheduler(FunctionStages(fake), rec, jobs=1)
    a1, b = make_run("a", sha="1" * 64), make_run("b")
    s.submit(a1)
    s.submit(b)
    deadline = time.monotonic() + TIMEOUT
    while not fake.log and time.monotonic() < deadline:
        time.sleep(0.005)
    a2 = make_run("a", sha="2" * 64)
    s.submit(a2)  # supersedes a1, which takes a second to die
    while len([x for x in fake.log if x[0] == "start"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    fake.release.set()
    assert s.wait_idle(TIMEOUT)
    # b got the slot while a1 was still dying; a2 waited for a1's process
    assert fake.when("start", b.run_id) < fake.when("end", a1.run_id) - 0.5
    assert fake.when("start", a2.run_id) >= fake.when("end", a1.run_id)
    assert rec.of("run_finished", run_id=a2.run_id)[0]["status"] == PASSED
    s.stop()


def test_many_files_saved_at_once_are_served_in_save_order_jobs_at_a_time():
    starts: list[str] = []
    running = {"now": 0, "max": 0}
    lock = threading.Lock()

    def execute(run, stage, device):
        with lock:
            starts.append(f"{run.run_id}:{stage}")
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        time.sleep(0.01)
        with lock:
            running["now"] -= 1
        return StageResult(stage, PASSED)

    s = Scheduler(FunctionStages(execute), Recorder(), jobs=2, exclusive_stages=frozenset())
    runs = [make_run(f"f{i:02d}") for i in range(16)]
    for r in runs:
        s.submit(r)
    assert s.wait_idle(TIMEOUT)
    assert running["max"] == 2
    # each file's correctness follows its own preflight, and no file waits
    # behind files saved after it: first stages start in save order
    firsts = [x.split(":")[0] for x in starts if x.endswith(":preflight")]
    assert firsts == [r.run_id for r in runs]
    for r in runs:
        assert starts.index(f"{r.run_id}:preflight") < starts.index(f"{r.run_id}:correctness")
        # a file's pipeline is not starved: it finishes within a few files' time
        assert starts.index(f"{r.run_id}:correctness") - starts.index(f"{r.run_id}:preflight") <= 3
    s.stop()
