"""Session bookkeeping with fake stages: snapshots, dedupe, dependencies,
config reload, and history written before anyone sees an event."""

from __future__ import annotations

import json
import os
import textwrap
import threading
from pathlib import Path

import pytest

from gemswatch.watch.config import load_config
from gemswatch.watch.devices import DeviceInfo
from gemswatch.watch.events import EventBus
from gemswatch.watch.filters import Change
from gemswatch.watch.stage import StageResult
from gemswatch.watch.session import Session
from _fake_stages import FunctionStages
from gemswatch.watch.status import PASSED

CONFIG = """\
watch: cands
benchmark: never
candidates:
  "*_v?.py":
    softmax: my_softmax
operators:
  softmax:
    tests: tests/test_softmax.py
"""


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "cands").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_softmax.py").write_text("")
    (tmp_path / "tests" / "conftest.py").write_text("")
    (tmp_path / "cands" / "_helpers.py").write_text("X = 1\n")
    (tmp_path / "cands" / "softmax_v2.py").write_text("import _helpers\ndef my_softmax(x):\n    return x\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


class Harness:
    def __init__(self, root: Path):
        self.root = root
        self.events: list[dict] = []
        self.notes: list[str] = []
        self.snapshots: list[bytes] = []
        self.bus = EventBus()
        self.bus.subscribe(self._ev)  # subscribed before the session: sees events before history!
        self.session = None

    def _ev(self, e):
        self.events.append(e)

    def execute(self, run, stage, device):
        self.snapshots.append(run.snapshot.read_bytes())
        return StageResult(stage, PASSED)

    def start(self):
        cfg = load_config(self.root / "config.yaml")
        self.session = Session(cfg, DeviceInfo("cpu"), self.bus, jobs=1, notify=self.notes.append, stages=FunctionStages(self.execute))
        return self.session

    def idle(self):
        assert self.session.scheduler.wait_idle(10)

    def runs(self):
        return [e for e in self.events if e["event"] == "run_queued"]


def test_snapshot_is_the_bytes_at_trigger_time(proj):
    h = Harness(proj)
    s = h.start()
    gate = threading.Event()
    orig = h.execute

    def slow(run, stage, device):
        gate.wait(5)
        return orig(run, stage, device)

    s._execute_stage = slow
    f = proj / "cands" / "softmax_v2.py"
    before = f.read_bytes()
    run = s.trigger(f)
    f.write_text("changed after the trigger\n")
    gate.set()
    h.idle()
    assert h.snapshots == [before, before]
    assert run.snapshot.read_bytes() == before
    assert run.snapshot.parent.parent == run.run_dir
    meta = json.loads((run.run_dir / "run.json").read_text())
    assert meta["content_sha256"] == run.sha256 and meta["candidate"] == "cands/softmax_v2.py"
    s.stop()


def test_unchanged_resave_does_not_rerun(proj):
    h = Harness(proj)
    s = h.start()
    f = proj / "cands" / "softmax_v2.py"
    assert s.trigger(f) is not None
    h.idle()
    f.write_bytes(f.read_bytes())  # same bytes
    assert s.trigger(f) is None
    assert s.trigger(f, force=True) is not None
    h.idle()
    assert len(h.runs()) == 2
    s.stop()


def test_unmapped_file_is_noted_once(proj):
    h = Harness(proj)
    s = h.start()
    other = proj / "cands" / "scratch.py"
    other.write_text("")
    s.handle_changes([(Change.added, str(other))])
    s.handle_changes([(Change.modified, str(other))])
    assert len(h.notes) == 1 and "cands/scratch.py is not mapped" in h.notes[0]
    s.stop()


def test_helper_and_test_changes_rerun_dependents(proj):
    h = Harness(proj)
    s = h.start()
    s.run_all()
    h.idle()
    assert len(h.runs()) == 1
    s.handle_changes([(Change.modified, str(proj / "cands" / "_helpers.py"))])
    h.idle()
    s.handle_changes([(Change.modified, str(proj / "tests" / "test_softmax.py"))])
    h.idle()
    s.handle_changes([(Change.modified, str(proj / "tests" / "conftest.py"))])
    h.idle()
    reasons = [e["reason"] for e in h.runs()]
    assert reasons == ["start", "changed cands/_helpers.py", "changed tests/test_softmax.py", "changed tests/conftest.py"]
    assert not h.notes  # a helper is not "unmapped"
    roots = dict(s.watch_roots())
    assert roots[(proj / "cands").resolve()] is True and roots[(proj / "tests").resolve()] is False
    s.stop()


def test_deleted_file_cancels_and_forgets(proj):
    h = Harness(proj)
    s = h.start()
    f = proj / "cands" / "softmax_v2.py"
    s.trigger(f)
    h.idle()
    f.unlink()
    s.handle_changes([(Change.deleted, str(f))])
    f.write_text("import _helpers\ndef my_softmax(x):\n    return x\n")  # same bytes come back
    s.handle_changes([(Change.added, str(f))])
    h.idle()
    assert len(h.runs()) == 2  # forgotten, so the same bytes run again
    s.stop()


def test_atomic_save_batch_triggers_the_destination(proj):
    h = Harness(proj)
    s = h.start()
    f = proj / "cands" / "softmax_v2.py"
    tmp = proj / "cands" / ".softmax_v2.py.tmp123"
    # what the watcher queues for "write temp, rename over": the temp is
    # filtered out, the destination shows up as added
    f.write_text("def my_softmax(x):\n    return x * 1\n")
    s.handle_changes([(Change.deleted, str(tmp)), (Change.added, str(f))])
    h.idle()
    assert [e["candidate"] for e in h.runs()] == ["cands/softmax_v2.py"]
    s.stop()


def test_bad_config_edit_keeps_the_last_good_one(proj):
    h = Harness(proj)
    s = h.start()
    cfg_path = proj / "config.yaml"
    cfg_path.write_text(CONFIG.replace("benchmark: never", "benchmark: sometimes"))
    s.handle_changes([(Change.modified, str(cfg_path))])
    errs = [e for e in h.events if e["event"] == "config_error"]
    assert errs and errs[0]["kept_last_good"] is True
    assert errs[0]["errors"][0]["line"] == 2 and errs[0]["errors"][0]["key"] == "benchmark"
    assert s.config.benchmark == "never" and s.config_error
    # a good edit that changes the selection re-runs the candidate
    cfg_path.write_text(CONFIG.replace("tests/test_softmax.py", "tests/test_softmax.py -x"))
    s.handle_changes([(Change.modified, str(cfg_path))])
    h.idle()
    assert s.config_error is None
    kinds = [e["event"] for e in h.events]
    assert kinds.index("config_reloaded") > kinds.index("config_error")  # what clears the dashboard's panel
    assert [e["reason"] for e in h.runs()] == ["config changed"]
    # an edit that changes nothing the pipeline runs re-runs nothing
    cfg_path.write_text(cfg_path.read_text() + "# a comment\n")
    s.handle_changes([(Change.modified, str(cfg_path))])
    h.idle()
    assert len(h.runs()) == 1
    s.stop()


def test_history_is_on_disk_before_the_event_is_shown(proj):
    cfg = load_config(proj / "config.yaml")
    bus = EventBus()
    seen = []
    session = Session(cfg, DeviceInfo("cpu"), bus, jobs=1, stages=FunctionStages(lambda r, st, d: StageResult(st, PASSED)))
    hist = session.history.path

    def late_sink(e):  # like the dashboard: registered after the session
        if e["event"] == "stage_finished":
            lines = [json.loads(x) for x in hist.read_text().splitlines()]
            seen.append(any(x.get("run_id") == e["run_id"] and x.get("stage") == e["stage"] for x in lines))

    bus.subscribe(late_sink)
    session.run_all()
    assert session.scheduler.wait_idle(10)
    assert seen == [True, True]
    session.stop()


def test_every_history_line_carries_the_environment(proj):
    cfg = load_config(proj / "config.yaml")
    session = Session(cfg, DeviceInfo("cpu"), EventBus(), jobs=1, stages=FunctionStages(lambda r, st, d: StageResult(st, PASSED)))
    session.run_all()
    assert session.scheduler.wait_idle(10)
    session.stop()
    lines = [json.loads(x) for x in session.history.path.read_text().splitlines()]
    assert {x["event"] for x in lines} == {"stage_finished", "run_finished"} and len(lines) == 3
    for line in lines:
        assert set(line["env"]) == {"commit", "dirty", "torch", "triton", "driver", "device"}
        assert line["env"]["device"] == "cpu" and line["env"]["torch"]


def test_history_survives_a_torn_line(proj):
    h = Harness(proj)
    s = h.start()
    s.run_all()
    h.idle()
    with open(s.history.path, "a") as f:
        f.write('{"event": "stage_fini')  # a writer killed mid-line
    recs = list(s.history.records())
    assert len(recs) == 3 and recs[-1]["event"] == "run_finished"
    last = s.history.last_by_candidate()
    assert set(last["cands/softmax_v2.py"]) == {"preflight", "correctness"}
    s.stop()


@pytest.mark.parametrize("line", [
    '{"event": "stage_finished", "candidate": ["cands/softmax_v2.py"], "stage": "preflight", "status": "passed"}',
    '{"event": "stage_finished", "candidate": "cands/softmax_v2.py", "stage": {"x": 1}, "status": "passed"}',
    '{"event": "stage_finished", "candidate": "cands/softmax_v2.py", "status": "passed"}',
    '{"event": "stage_finished", "candidate": "cands/softmax_v2.py", "stage": "preflight", "cases": [1, 2]}',
    '{"event": "run_finished", "candidate": "cands/softmax_v2.py", "speedup": "fast"}',
    '[1, 2, 3]',
])
def test_a_well_formed_line_that_is_not_a_record_is_skipped_and_counted(proj, line):
    # A candidate can write such a line; the watcher must start and say so.
    h = Harness(proj)
    s = h.start()
    s.run_all()
    h.idle()
    s.stop()
    with open(s.history.path, "a") as f:
        f.write(line + "\n")
    h2 = Harness(proj)
    s2 = h2.start()
    try:
        assert set(s2.last_stage_records()["cands/softmax_v2.py"]) == {"preflight", "correctness"}
        assert any("skipped 1 line(s) that are not gemswatch records" in n for n in h2.notes)
    finally:
        s2.stop()


def test_after_a_restart_each_file_shows_its_last_verdict_not_a_run_stopped_by_quitting(proj):
    h = Harness(proj)
    s = h.start()
    s.run_all()
    h.idle()
    s.stop()
    first = s.last_stage_records()["cands/softmax_v2.py"]
    # A later run stopped part way (the user quit): one stage finished, one stopped.
    stopped = {"candidate": "cands/softmax_v2.py", "run_id": "r-stopped", "time": "2999-01-01T00:00:00.000+00:00"}
    s.history.append({**stopped, "event": "stage_finished", "stage": "preflight", "status": "passed"})
    s.history.append({**stopped, "event": "stage_finished", "stage": "correctness", "status": "superseded"})
    s.history.append({**stopped, "event": "run_finished", "status": "superseded"})
    h2 = Harness(proj)
    s2 = h2.start()
    try:
        again = s2.last_stage_records()["cands/softmax_v2.py"]
        assert {k: v["run_id"] for k, v in again.items()} == {k: v["run_id"] for k, v in first.items()}
        assert again["correctness"]["status"] == "passed"
    finally:
        s2.stop()


def test_benchmark_policy_auto_and_benchmark_now(proj):
    (proj / "config.yaml").write_text(
        textwrap.dedent(CONFIG).replace("benchmark: never", "benchmark: manual")
        + "    benchmark: tests/test_softmax.py\n"
    )
    h = Harness(proj)
    s = h.start()
    s.run_all()
    h.idle()
    assert h.runs()[-1]["stages"] == ["preflight", "correctness"]
    s.benchmark_now()
    h.idle()
    assert h.runs()[-1]["stages"] == ["benchmark"]  # same bytes already passed correctness
    (proj / "cands" / "softmax_v2.py").write_text("def my_softmax(x):\n    return x\n")
    s.benchmark_now(["cands/softmax_v2.py"])
    h.idle()
    assert h.runs()[-1]["stages"] == ["preflight", "correctness", "benchmark"]
    s.stop()


def test_each_benchmark_case_gets_its_speedup_at_the_previous_passing_benchmark(proj):
    (proj / "config.yaml").write_text(
        textwrap.dedent(CONFIG).replace("benchmark: never", "benchmark: auto") + "    benchmark: tests/test_softmax.py\n"
    )
    speedups = iter([{"a": 2.0, "b": 1.0}, {"a": 0.5, "b": 1.1}])
    seen: list[tuple] = []

    def execute(run, stage, device):
        if stage != "benchmark":
            return StageResult(stage, PASSED)
        cases = tuple({"case": k, "speedup": v} for k, v in next(speedups).items())
        return StageResult(stage, PASSED, speedup=1.0, per_case=cases)

    h = Harness(proj)
    h.bus.subscribe(lambda e: e["event"] == "stage_finished" and e["stage"] == "benchmark" and seen.append(e["per_case"]))
    s = Session(load_config(proj / "config.yaml"), DeviceInfo("cpu"), h.bus, jobs=1, stages=FunctionStages(execute))
    try:
        s.run_all()
        assert s.scheduler.wait_idle(10)
        (proj / "cands" / "softmax_v2.py").write_text("def my_softmax(x):\n    return x * 1\n")
        s.trigger(proj / "cands" / "softmax_v2.py", "saved")
        assert s.scheduler.wait_idle(10)
    finally:
        s.stop()
    assert [{c["case"]: c["prev"] for c in cases} for cases in seen] == [{"a": None, "b": None}, {"a": 2.0, "b": 1.0}]


def test_a_symlinked_candidate_runs_when_the_file_it_points_to_changes(proj):
    elsewhere = proj / "kernels"
    elsewhere.mkdir()
    target = elsewhere / "softmax_impl.py"
    target.write_text("def my_softmax(x):\n    return x\n")
    (proj / "cands" / "softmax_v3.py").symlink_to(target)
    h = Harness(proj)
    s = h.start()
    assert [c.rel for c in s.candidates()] == ["cands/softmax_v2.py", "cands/softmax_v3.py"]  # by its own name
    s.run_all()
    h.idle()
    target.write_text("def my_softmax(x):\n    return x + 0\n")
    s.handle_changes([(Change.modified, str(target))])
    h.idle()
    assert [(e["candidate"], e["reason"]) for e in h.runs()][-1] == ("cands/softmax_v3.py", "changed kernels/softmax_impl.py")
    assert h.snapshots[-1] == target.read_bytes()  # the bytes it points to
    assert dict(s.watch_roots())[elsewhere.resolve()] is False  # the folder it points into is watched
    s.stop()


def test_a_seed_given_on_the_command_line_reaches_every_correctness_command_across_reloads(proj):
    from gemswatch.watch.stage.plan import stage_command

    h = Harness(proj)
    session = Session(load_config(proj / "config.yaml"), DeviceInfo("cpu"), h.bus, jobs=1,
                      stages=FunctionStages(h.execute), seed=1234)
    try:
        (proj / "config.yaml").write_text(CONFIG + "\n# edited\n")
        assert session.reload_config()
        cand = session.candidates()[0]
        cmd = stage_command(session.config, cand, "correctness", cand.path, proj / "report.json")
        assert cmd[cmd.index("--seed") + 1] == "1234"
    finally:
        session.stop()
    # Without it, each correctness stage draws a seed of its own.
    plain = load_config(proj / "config.yaml")
    cand = Session(plain, DeviceInfo("cpu"), EventBus(), jobs=1, stages=FunctionStages(h.execute)).candidates()[0]
    assert "--seed" not in stage_command(plain, cand, "correctness", cand.path, proj / "report.json")


def test_a_private_candidates_snapshot_and_run_folder_stay_private(proj):
    import os
    import stat

    cand = proj / "cands" / "softmax_v2.py"
    os.chmod(cand, 0o600)
    seen: list = []

    def execute(run, stage, device):
        seen.append(run)
        return StageResult(stage, PASSED)

    s = Session(load_config(proj / "config.yaml"), DeviceInfo("cpu"), EventBus(), jobs=1, stages=FunctionStages(execute))
    try:
        s.run_all()
        assert s.scheduler.wait_idle(10)
    finally:
        s.stop()
    run = seen[0]
    assert stat.S_IMODE(run.snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE(run.run_dir.stat().st_mode) == 0o700


def test_reports_get_the_mode_logs_get():
    import os
    import stat
    import tempfile

    from gemswatch.testing._atomic import write_json_atomic

    with tempfile.TemporaryDirectory() as d:
        write_json_atomic(os.path.join(d, "r.json"), {"a": 1})
        with open(os.path.join(d, "s.log"), "w"):
            pass
        modes = {stat.S_IMODE(os.stat(os.path.join(d, n)).st_mode) for n in ("r.json", "s.log")}
        assert len(modes) == 1


def test_a_save_whose_run_folder_cannot_be_written_is_an_error_on_its_row_and_retried(proj):
    h = Harness(proj)
    session = h.start()
    runs = session.history.runs
    runs.parent.mkdir(parents=True, exist_ok=True)
    runs.write_text("not a folder\n")  # e.g. replaced by a file
    assert session.trigger(proj / "cands" / "softmax_v2.py") is None
    finished = [e for e in h.events if e["event"] == "stage_finished"]
    assert [(e["stage"], e["status"]) for e in finished] == [("preflight", "error"), ("correctness", "not_run")]
    assert str(runs) in finished[0]["message"] and "writable folder" in finished[0]["message"]
    assert h.runs()[-1]["run_id"] == finished[0]["run_id"]  # the row takes the error (same run id)
    assert [e["status"] for e in h.events if e["event"] == "run_finished"] == ["error"]
    runs.unlink()
    # The same bytes again (the next change) are tried again, and now kept.
    run = session.trigger(proj / "cands" / "softmax_v2.py")
    assert run is not None and run.snapshot.exists()
    h.idle()
    session.stop()


def test_a_history_that_cannot_be_written_is_said_once(proj):
    h = Harness(proj)
    session = h.start()
    session.history.dir.mkdir(parents=True, exist_ok=True)
    session.history.path.mkdir()  # history.jsonl cannot be opened for appending
    session.run_all()
    h.idle()
    session.stop()
    assert session.history_error and str(session.history.path) in session.history_error
    assert sum("results are not kept in history" in n for n in h.notes) == 1
    # A session started on it says it cannot show the earlier verdicts (and starts).
    again = Harness(proj)
    again.start().stop()
    assert any("cannot read" in n and str(session.history.path) in n for n in again.notes), again.notes


def test_f_runs_the_cases_correctness_failed_first_then_the_rest(proj):
    report = proj / "last_correctness.json"
    failed = ["tests/test_softmax.py::test_rows[float16-781]", "tests/test_softmax.py::test_dims[2]"]
    report.write_text(json.dumps({"schema_version": "gemswatch.correctness/v1", "records": [
        {"nodeid": failed[0], "result": "failed"}, {"nodeid": "tests/test_softmax.py::test_ok", "result": "passed"},
        {"nodeid": failed[1], "result": "error"}]}))

    def stages(run, stage, device):
        return StageResult(stage, "failed" if stage == "correctness" else PASSED, report=str(report))

    h = Harness(proj)
    h.execute = stages
    session = h.start()
    session.run_all()
    h.idle()
    statuses = [(e["stage"], e["status"], e["message"]) for e in h.events if e["event"] == "stage_finished"]
    assert statuses[-1] == ("correctness", "failed", "")
    (run,) = session.rerun_failed()
    assert run.failed_first.read_text().splitlines() == failed
    from gemswatch.watch.stage.plan import plan_stage

    correctness = plan_stage(run, "correctness", None).command
    i = correctness.index("--gemswatch-failed-first")
    assert correctness[i + 1] == str(run.failed_first)
    assert "--gemswatch-failed-first" not in (plan_stage(run, "preflight", None).command or ())
    h.idle()
    session.stop()


def test_a_stage_gated_by_a_failure_says_which(proj):
    h = Harness(proj)
    h.execute = lambda run, stage, device: StageResult(stage, "failed" if stage == "preflight" else PASSED)
    session = h.start()
    session.run_all()
    h.idle()
    session.stop()
    last = [e for e in h.events if e["event"] == "stage_finished"][-1]
    assert (last["stage"], last["status"], last["message"]) == ("correctness", "not_run", "correctness not run: preflight failed")


def test_run_folders_and_history_stay_in_the_watching_project_not_the_checkout_it_drives(tmp_path):
    checkout = tmp_path / "FlagGems"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_softmax.py").write_text("")
    mine = tmp_path / "mine"
    (mine / "cands").mkdir(parents=True)
    (mine / "cands" / "softmax_v2.py").write_text("def my_softmax(x):\n    return x\n")
    (mine / "config.yaml").write_text(CONFIG.replace("watch: cands", f"watch: cands\nproject: {checkout}"))
    h = Harness(mine)
    session = h.start()
    assert session.config.project == checkout
    run = session.trigger(mine / "cands" / "softmax_v2.py")
    h.idle()
    session.stop()
    assert run.run_dir.parent == mine / ".gemswatch" / "runs"
    assert (mine / ".gemswatch" / "history.jsonl").exists()
    assert not (checkout / ".gemswatch").exists()
    from gemswatch.watch.stage.plan import base_env

    if "TRITON_CACHE_DIR" not in os.environ:  # a user's setting wins
        assert base_env(session.config)["TRITON_CACHE_DIR"].startswith(str(mine / ".gemswatch"))
