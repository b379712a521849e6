"""The Ray executor on a real local cluster (two CPU slots, two fake GPUs).

One cluster is started for the module (about 6 s on a 2-core machine). The
executor's stages are trivial ``python -c`` processes, so each of those
tests costs about its Ray worker start: they check what a user of the
cluster relies on, one whole GPU per stage, no retry of a crash, the time
limit, supersession and the files of a stage that ran from a shipped copy
of the project, through the same verdict code as local stages. The last
test is end to end: `gemswatch run --executor ray` joins the cluster and
must give what a local `gemswatch run` gives (about 25 s: a local run, and
three cold stages through Ray). Skipped where Ray is not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

import yaml

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "gemswatch[ray]")')

from gemswatch.watch.stage.plan import StagePlan  # noqa: E402
from gemswatch.watch.stage.ray import RayCluster, RayExecutor  # noqa: E402
from gemswatch.watch.stage.verdict import decide  # noqa: E402
from gemswatch.watch.status import CRASHED, ERROR, PASSED, SUPERSEDED, TIMEOUT  # noqa: E402

GPUS = 2
REPO = Path(__file__).resolve().parents[2]
CANDIDATE = b"VALUE = 1\n"


@pytest.fixture(scope="module")
def cluster():
    # A test cluster of this machine: no token (Ray 2.60 turns token auth on by default).
    os.environ["RAY_AUTH_MODE"] = "disabled"
    if ray.is_initialized():
        ray.shutdown()
    context = ray.init(num_cpus=2, num_gpus=GPUS, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        joined = RayCluster()  # joins the cluster above, and leaves it running at close
        joined.test_address = context.address_info["address"]
        yield joined
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def executor(cluster):
    return RayExecutor(cluster)


def stage_plan(root: Path, code: str, *, timeout: float = 60, device: str | None = "ray:0",
               guarded: tuple[Path, ...] = ()) -> StagePlan:
    """The plan of a stage that runs ``code`` in the project ``root``; its
    run folder is ``root/.gemswatch/runs/<id>`` as for a real stage."""
    run_id = uuid.uuid4().hex[:12]
    run_dir = root / ".gemswatch" / "runs" / run_id
    snapshot = run_dir / "snapshot" / "cand.py"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_bytes(CANDIDATE)
    env = dict(os.environ, GEMSWATCH_RUN_ID=run_id, STAGE_RUN_DIR=str(run_dir))
    return StagePlan(
        run_id=run_id,
        stage="correctness",
        command=(sys.executable, "-c", textwrap.dedent(code), str(run_dir / "correctness.json")),
        cwd=root,
        env=env,
        log=run_dir / "correctness.log",
        report=run_dir / "correctness.json",
        timeout=timeout,
        grace=1.0,
        device=device,
        guarded=guarded,
        snapshot=snapshot,
        sha256=hashlib.sha256(CANDIDATE).hexdigest(),
    )


def verdict(plan: StagePlan, outcome):
    log = plan.log.read_text() if plan.log.exists() else ""
    report = json.loads(plan.report.read_text()) if plan.report.exists() else None
    return decide(plan.stage, outcome, report, ["softmax"], log, None if report is not None else "no report file")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {timeout} s")


# A stage that passes: it writes a correctness report with one passing case that called the candidate.
PASSING = """
import json, os, sys
json.dump({"schema_version": "gemswatch.correctness/v1",
           "records": [{"nodeid": "t::a", "result": "passed", "candidate_calls": {"softmax": 1}}]},
          open(sys.argv[1], "w"))
print("visible", os.environ.get("CUDA_VISIBLE_DEVICES"))
"""


def test_each_stage_holds_a_whole_gpu_of_its_own(executor, tmp_path):
    # Four stages at once on two GPUs: each sees exactly one device, and two
    # stages that ran at the same time never saw the same one.
    code = """
    import os, sys, time
    start = time.time()
    time.sleep(0.3)
    open(os.environ["STAGE_RUN_DIR"] + "/seen", "w").write(f"{os.environ['CUDA_VISIBLE_DEVICES']} {start} {time.time()}")
    """
    plans = [stage_plan(tmp_path, code, device=f"ray:{i % GPUS}") for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda p: executor.execute(p, threading.Event()), plans))
    seen = []
    for plan, outcome in zip(plans, outcomes):
        assert outcome.returncode == 0, plan.log.read_text()
        gpu, start, end = (plan.log.parent / "seen").read_text().split()
        assert gpu in {str(i) for i in range(GPUS)}  # one GPU, not a list, not the plan's slot name
        assert outcome.device == gpu  # the stage_finished event names the GPU the stage held
        seen.append((gpu, float(start), float(end)))
    for i, (gpu, start, end) in enumerate(seen):
        for other_gpu, other_start, other_end in seen[i + 1:]:
            if gpu == other_gpu:
                assert end <= other_start or other_end <= start, f"two stages shared GPU {gpu} at once: {seen}"


def test_a_passing_stage_is_judged_by_the_local_verdict(executor, tmp_path):
    plan = stage_plan(tmp_path, PASSING)
    outcome = executor.execute(plan, threading.Event())
    v = verdict(plan, outcome)
    assert (v.status, v.cases.passed, v.candidate_calls) == (PASSED, 1, {"softmax": 1})
    assert "visible 0" in plan.log.read_text() or "visible 1" in plan.log.read_text()


def test_a_cpu_stage_holds_a_cpu_slot_and_no_gpu(executor, tmp_path):
    plan = stage_plan(tmp_path, PASSING, device=None)
    plan = replace(plan, env={k: v for k, v in plan.env.items() if k != "CUDA_VISIBLE_DEVICES"})
    outcome = executor.execute(plan, threading.Event())
    assert verdict(plan, outcome).status == PASSED
    assert outcome.device is None
    assert ray.get_gpu_ids() == []  # the driver holds none either


def confine_signals_works() -> bool:
    """Whether stages here confine their signals (Landlock ABI 6 and later)."""
    from gemswatch.testing.isolation.sandbox import landlock_abi

    return landlock_abi() >= 6


def test_a_stage_whose_worker_dies_runs_once_and_is_crashed(executor, tmp_path):
    # The Ray worker that runs the stage dies (killed from outside: the stage
    # itself may not signal it, as a local stage may not signal the watcher):
    # Ray would retry the task three times by default; the stage must run
    # once, end crashed with the reason, and its own process must not
    # outlive the worker.
    code = """
    import os, signal, time
    try:
        os.kill(os.getppid(), signal.SIGKILL)
        tried = "sent"
    except PermissionError:
        tried = "refused"
    with open(os.environ["STAGE_RUN_DIR"] + "/runs", "a") as f:
        f.write(f"{os.getpid()} {os.getppid()} {tried}\\n")
    time.sleep(60)
    """
    plan = stage_plan(tmp_path, code)
    runs = plan.log.parent / "runs"

    def kill_the_worker() -> None:
        deadline = time.monotonic() + 60
        while not runs.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if runs.exists():
            os.kill(int(runs.read_text().split()[1]), signal.SIGKILL)

    killer = threading.Thread(target=kill_the_worker, daemon=True)
    killer.start()
    outcome = executor.execute(plan, threading.Event())
    killer.join(10)
    v = verdict(plan, outcome)
    assert v.status == CRASHED
    assert "Ray worker that ran the stage died" in v.message
    # With Ray's default retries the task would have run four times before execute returned.
    lines = runs.read_text().splitlines()
    assert len(lines) == 1
    pids = lines[0].split()
    if confine_signals_works():
        assert pids[2] == "refused"
    deadline = time.monotonic() + 10
    while alive(int(pids[0])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(int(pids[0])), "the stage outlived its worker"


def test_a_crashing_candidate_is_crashed_as_locally(executor, tmp_path):
    code = """
    import os, signal
    os.kill(os.getpid(), signal.SIGSEGV)
    """
    plan = stage_plan(tmp_path, code)
    v = verdict(plan, executor.execute(plan, threading.Event()))
    assert (v.status, v.message) == (CRASHED, "killed by SIGSEGV")


def test_a_stage_past_its_limit_is_stopped_and_timed_out(executor, tmp_path):
    code = """
    import os, time
    open(os.environ["STAGE_RUN_DIR"] + "/pid", "w").write(str(os.getpid()))
    time.sleep(60)
    """
    plan = stage_plan(tmp_path, code, timeout=1.5)
    outcome = executor.execute(plan, threading.Event())
    v = verdict(plan, outcome)
    assert (v.status, v.message) == (TIMEOUT, "correctness exceeded its time limit of 1.5 s; stopped")
    assert not alive(int((plan.log.parent / "pid").read_text()))


def test_a_newer_save_cancels_the_task_on_the_cluster(executor, tmp_path):
    code = """
    import os, time
    open(os.environ["STAGE_RUN_DIR"] + "/pid", "w").write(str(os.getpid()))
    time.sleep(60)
    """
    plan = stage_plan(tmp_path, code)
    cancel = threading.Event()
    result = []
    t = threading.Thread(target=lambda: result.append(executor.execute(plan, cancel)))
    t.start()
    pid = int(wait_for_file(plan.log.parent / "pid"))
    cancel.set()
    t.join(60)  # at worst the grace, then a forced cancel (CANCEL_SLACK_S twice), on a loaded machine
    assert not t.is_alive(), "execute did not return after the cancel"
    assert result[0].cancelled
    assert verdict(plan, result[0]).status == SUPERSEDED
    assert not alive(pid), "the superseded stage is still running"


def test_a_shipped_stage_runs_in_a_copy_and_its_files_come_back(cluster, tmp_path):
    # ship=True: the project travels as a working_dir package and the stage
    # runs in a copy of it, as on a node without the driver's files. Its log
    # and report come back to the run folder; a judged-by file it edits is
    # reported (and the driver's own file is untouched).
    project = tmp_path / "proj"
    (project / "tests").mkdir(parents=True)
    judge = project / "tests" / "test_x.py"
    judge.write_text("JUDGE = 1\n")
    code = PASSING + """
import pathlib
here = pathlib.Path.cwd()
print("in copy", "gemswatch-stage-" in str(here), (here / "tests" / "test_x.py").read_text().strip())
print("snapshot at", sys.argv[1])
(here / "tests" / "test_x.py").write_text("JUDGE = 'rigged'\\n")
"""
    plan = stage_plan(project, code, guarded=(judge,))
    outcome = RayExecutor(cluster, ship=True).execute(plan, threading.Event())
    log = plan.log.read_text()
    assert "in copy True JUDGE = 1" in log
    assert f"snapshot at {plan.report}" in log  # the paths of the copy are the driver's again
    assert plan.report.exists(), log
    assert [t.path for t in outcome.tampered] == [judge]
    assert outcome.tampered[0].kept_at.read_text() == "JUDGE = 'rigged'\n"
    assert judge.read_text() == "JUDGE = 1\n"


def test_the_cluster_gives_the_scheduler_one_exclusive_slot_per_gpu(cluster):
    info = cluster.device_info()
    assert (info.kind, len(info.slots), info.exclusive, info.default_jobs()) == ("cuda", GPUS, True, GPUS)


def test_a_task_the_cluster_cannot_set_up_is_an_error(cluster, tmp_path, monkeypatch):
    # A project that cannot travel (here: packing fails) is the stage's error, not an exception.
    from gemswatch.watch.stage.ray import executor as ray_executor
    from gemswatch.watch.stage.ray.package import PackageError

    def refuse(project):
        raise PackageError(f"the project {project} cannot travel to the cluster: too large")

    monkeypatch.setattr(ray_executor, "project_package", refuse)
    plan = stage_plan(tmp_path, PASSING)
    v = verdict(plan, RayExecutor(cluster, ship=True).execute(plan, threading.Event()))
    assert v.status == ERROR and "cannot travel to the cluster" in v.message


# -- end to end ------------------------------------------------------------------

PYTEST_INI = "[pytest]\naddopts = -p no:cacheprovider\nmarkers =\n    softmax: tests of softmax\n"


def softmax_project(root: Path) -> Path:
    """The repository's softmax tests, and a good and a raising candidate of the corpus mapped to them."""
    for rel in ("tests/conftest.py", "tests/test_softmax.py", "tests/_softmax_family.py",
                "benchmark/conftest.py", "benchmark/test_softmax_perf.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, root / rel)
    (root / "pytest.ini").write_text(PYTEST_INI)
    (root / "corpus").mkdir()
    for name in ("good.py", "raises.py"):
        shutil.copyfile(REPO / "tests" / "corpus" / name, root / "corpus" / name)
    config = {
        "watch": "corpus",
        "benchmark": "never",
        "jobs": 2,
        # Cold stages beside a cluster on two cores: limits no verdict here is about.
        "timeouts": {"preflight": 120, "correctness": 240},
        "candidates": {"*.py": {"softmax": "my_softmax"}},
        "operators": {"softmax": {"tests": "tests/test_softmax.py",
                                  "benchmark": "benchmark/test_softmax_perf.py::test_softmax"}},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def gemswatch_run(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = {k: v for k, v in os.environ.items() if k != "GEMSWATCH_DEVICE"}
    env["GEMSWATCH_DEVICE"] = "cpu"  # the local run's stages on the CPU, as the cluster's (its GPUs are fake)
    r = subprocess.run([sys.executable, "-m", "gemswatch.watch", "run", "--json", *args], cwd=root, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = r.stdout.splitlines()
    assert all(ln.startswith("{") for ln in lines), f"not JSON on stdout: {[ln for ln in lines if not ln.startswith('{')]}"
    return r, [json.loads(ln) for ln in lines]


def fields(records: list[dict]) -> dict[str, set[str]]:
    """The fields each kind of record carries."""
    out: dict[str, set[str]] = {}
    for r in records:
        out.setdefault(r["event"], set()).update(r)
    return out


def verdicts(records: list[dict]) -> dict[tuple[str, str], tuple[str, str]]:
    return {(r["candidate"], r["stage"]): (r["status"], r["message"]) for r in records if r["event"] == "stage_finished"}


def run_files(root: Path) -> Counter:
    """The files of the run folders, named by candidate rather than run id."""
    files: Counter = Counter()
    for run_dir in (root / ".gemswatch" / "runs").iterdir():
        stem = run_dir.name.split("-")[2]
        files.update(f"{stem}/{p.relative_to(run_dir)}" for p in run_dir.rglob("*") if p.is_file())
    return files


def history(root: Path) -> list[dict]:
    return [json.loads(ln) for ln in (root / ".gemswatch" / "history.jsonl").read_text().splitlines()]


def test_gemswatch_run_on_ray_gives_the_local_verdicts_events_reports_and_history(cluster, tmp_path):
    # Folder names of one length: a message is cut to a length before the snapshot's path leaves it.
    local, local_events = gemswatch_run(softmax_project(tmp_path / "local"))
    on_ray, ray_events = gemswatch_run(softmax_project(tmp_path / "onray"), "--executor", "ray",
                                       "--ray-address", cluster.test_address)
    assert on_ray.returncode == local.returncode == 1, on_ray.stderr
    assert verdicts(ray_events) == verdicts(local_events)
    assert {s for s, _ in verdicts(ray_events).values()} == {PASSED, "failed", "not_run"}
    assert fields(ray_events) == fields(local_events)
    assert all(e["warm"] is False for e in ray_events if e["event"] == "stage_finished")
    assert fields(history(tmp_path / "onray")) == fields(history(tmp_path / "local"))
    assert run_files(tmp_path / "onray") == run_files(tmp_path / "local")
    assert "raylet" not in on_ray.stderr
