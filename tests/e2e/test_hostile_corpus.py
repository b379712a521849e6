"""The hostile corpus (tests/corpus/) end to end: every file through
`gemswatch run --json`, and the process-hostile ones through a live watcher.

The project is built in a temporary folder from the repository's own softmax
test and benchmark files, so the stages run the real correctness and
benchmark plugins; the candidates are plain torch, so a stage costs about its
interpreter start. Each fixture runs gemswatch once per module; the tests
then read its events, history and processes. `gemswatch run` forks its
stages from the warm pool (the default); the watcher starts them cold, so
both ways of starting a stage meet the process-hostile files. Every wait has
a bound.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from gemswatch.testing.isolation.sandbox import landlock_abi
from _e2e_helpers import alive
from test_watch_e2e import Watcher, events, gemswatch, sha

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text())
ENTRIES = MANIFEST["candidates"]
WATCHED = [name for name, e in ENTRIES.items() if e.get("watch")]
# Files that edit what judges every stage beside theirs: run on their own.
ALONE = [name for name, e in ENTRIES.items() if e.get("alone")]
# Files that cheat the benchmark: run in a project that benchmarks.
BENCHED = [name for name, e in ENTRIES.items() if e.get("benchmark")]
SHARED = [name for name in ENTRIES if name not in ALONE and name not in BENCHED]

PYTEST_INI = """\
[pytest]
addopts = -p no:cacheprovider
markers =
    softmax: tests of softmax
    log_softmax: tests of log_softmax
"""


def build_project(root: Path, names: list[str], benchmark: bool = False) -> Path:
    """A project with the repository's softmax tests and benchmark, the
    corpus files ``names`` under corpus/, and a config.yaml mapping them
    (benchmarking every one that passes, with ``benchmark``)."""
    for rel in ("tests/conftest.py", "tests/test_softmax.py", "tests/_softmax_family.py", "benchmark/conftest.py", "benchmark/test_softmax_perf.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, root / rel)
    (root / "pytest.ini").write_text(PYTEST_INI)
    (root / "corpus").mkdir()
    (root / "pids").mkdir()
    candidates = {}
    for name in names:
        shutil.copyfile(CORPUS / name, root / "corpus" / name)
        entry = ENTRIES[name]
        candidates[name] = {entry.get("operator", MANIFEST["operator"]): entry.get("function", MANIFEST["function"])}
    config = {
        "watch": "corpus",
        "benchmark": "auto" if benchmark else "never",
        "jobs": 2,
        "grace": 1,
        # Short limits: two corpus files hang on purpose.
        "timeouts": {"preflight": 10, "correctness": 40},
        # The pid files are written by candidates, which the sandbox lets
        # write only where the stage's environment says.
        "env": {"CORPUS_PIDS": str(root / "pids"), "GEMSWATCH_CANDIDATE_WRITABLE": str(root / "pids")},
        "candidates": candidates,
        "operators": {
            "softmax": {
                # The benchmarked files cheat the benchmark and pass every check
                # before it: one correctness test is enough to lead there.
                "tests": "tests/test_softmax.py::test_softmax_all_negative_infinity_row_is_nan" if benchmark
                else "tests/test_softmax.py",
                "benchmark": "benchmark/test_softmax_perf.py::test_softmax",
            },
            "softmax_ghost": {"tests": "tests/test_softmax.py", "marker": "softmax"},
        },
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def stage_processes(run_ids: set[str], root: int | None = None) -> list[str]:
    """Live processes that belong to a stage: descendants of ``root`` (the
    watcher; its warm pool and its reaper are not stages) and any process
    whose environment names one of ``run_ids``, wherever it was reparented."""
    found: dict[int, str] = {}
    wanted = {f"GEMSWATCH_RUN_ID={r}".encode() for r in run_ids}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = set((d / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if env & wanted and alive(int(d.name)):
            found[int(d.name)] = "environment"
    if root is not None:
        kids = _children_map()
        todo = list(kids.get(root, []))
        while todo:
            pid = todo.pop()
            todo += kids.get(pid, [])
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if alive(pid) and "warmpool/server.py" not in cmd and "stage/reaper.py --reaper" not in cmd:
                found[pid] = f"descendant of the watcher: {cmd[:120]}"
    return [f"{pid}: {why}" for pid, why in sorted(found.items())]


def recorded_pids(project: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in (project / "pids").glob("*.pid")}


def _alternatives(message: str | list[str]) -> list[str]:
    """A manifest message: one fragment, or a list of which one must show."""
    return [message] if isinstance(message, str) else list(message)


def check_statuses(events: list[dict], names: list[str]) -> list[str]:
    """One line per file whose run did not end as the manifest says."""
    runs = {e["candidate"]: e for e in events if e["event"] == "run_finished"}
    stages = {(e["candidate"], e["stage"]): e for e in events if e["event"] == "stage_finished"}
    problems = []
    for name in names:
        entry, rel = ENTRIES[name], f"corpus/{name}"
        run = runs.get(rel)
        if run is None:
            problems.append(f"{name}: no run_finished")
            continue
        if run["status"] != entry["status"]:
            problems.append(f"{name}: status {run['status']} ({run.get('message')!r}), expected {entry['status']}")
            continue
        if "stage" in entry:
            stage = stages.get((rel, entry["stage"]))
            if stage is None or stage["status"] != entry["status"]:
                problems.append(f"{name}: stage {entry['stage']} is {stage and stage['status']}, expected {entry['status']}")
            elif not any(m in stage["message"] for m in _alternatives(entry["message"])):
                problems.append(f"{name}: {entry['stage']} message {stage['message']!r} lacks {entry['message']!r}")
    return problems


def history_covers(project: Path, events: list[dict]) -> list[str]:
    lines = (project / ".gemswatch" / "history.jsonl").read_text().splitlines()
    history = {(h["run_id"], h["stage"]) for h in map(json.loads, lines) if h["event"] == "stage_finished"}
    seen = {(e["run_id"], e["stage"]) for e in events if e["event"] == "stage_finished"}
    return sorted(f"{r} {s}" for r, s in seen - history)


# ---------------------------------------------------------------------------
# gemswatch run --json over the whole corpus


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    project = build_project(tmp_path_factory.mktemp("corpus_run"), SHARED)
    r = gemswatch(project, "run", "--json", timeout=420)
    return {"project": project, "rc": r.returncode, "stderr": r.stderr, "events": events(r.stdout)}


def test_corpus_has_the_required_kinds():
    assert len(ENTRIES) >= 20
    assert set(ENTRIES) == {p.name for p in CORPUS.glob("*.py")}
    statuses = {e["status"] for e in ENTRIES.values()}
    assert {"passed", "failed", "error", "crashed", "timeout", "uncalled"} <= statuses


def test_run_gives_every_file_its_expected_status(corpus_run):
    assert corpus_run["rc"] == 1, corpus_run["stderr"][-3000:]
    assert check_statuses(corpus_run["events"], SHARED) == []


@pytest.mark.parametrize("name", ALONE)
def test_a_file_that_edits_its_judge_gets_its_status_and_the_files_are_put_back(tmp_path, name):
    project = build_project(tmp_path, [name])
    before = {p: p.read_bytes() for p in (project / "tests").iterdir() if p.is_file()}
    r = gemswatch(project, "run", "--json", timeout=120)
    assert check_statuses(events(r.stdout), [name]) == []
    assert {p: p.read_bytes() for p in before} == before
    if not landlock_abi():  # with the sandbox the write is refused; without, the guard restores
        kept = list((project / ".gemswatch" / "runs").glob("*/tampered/tests/*.py"))
        assert kept, "the changed file is kept in the run folder"


def test_files_that_cheat_the_benchmark_get_their_status(tmp_path):
    project = build_project(tmp_path, BENCHED, benchmark=True)
    r = gemswatch(project, "run", "--json", timeout=600)
    evs = events(r.stdout)
    assert check_statuses(evs, BENCHED) == [], r.stderr[-3000:]
    pids = recorded_pids(project)
    assert {name.split(".")[0] for name in pids} == {n[:-3] for n in BENCHED if ENTRIES[n].get("pids")}
    assert [name for name, pid in pids.items() if alive(pid)] == []
    (bench,) = [e for e in evs if e["event"] == "stage_finished" and e["stage"] == "benchmark"
                and e["candidate"] == "corpus/slows_the_baseline.py"]
    assert "2 other process(es); they were held still" in Path(bench["log"]).read_text()


def test_run_leaves_no_stage_process(corpus_run):
    run_ids = {e["run_id"] for e in corpus_run["events"] if e["event"] == "run_queued"}
    assert stage_processes(run_ids) == []
    pids = recorded_pids(corpus_run["project"])
    assert {name.split(".")[0] for name in pids} == {n[:-3] for n in SHARED if ENTRIES[n].get("pids")}
    assert [name for name, pid in pids.items() if alive(pid)] == []


def test_run_records_every_finished_stage(corpus_run):
    assert history_covers(corpus_run["project"], corpus_run["events"]) == []


def test_flooded_log_is_cut_to_head_and_tail(corpus_run):
    (stage,) = [e for e in corpus_run["events"] if e["event"] == "stage_finished"
                and e["candidate"] == "corpus/flood_stdout.py" and e["stage"] == "preflight"]
    log = Path(stage["log"])
    assert log.stat().st_size < 5 << 20
    assert "bytes of output dropped here" in log.read_text(errors="replace")


def test_self_deleting_candidate_keeps_the_users_file(corpus_run):
    assert (corpus_run["project"] / "corpus" / "self_delete.py").exists()


# ---------------------------------------------------------------------------
# a live watcher over the process-hostile files


@pytest.fixture(scope="module")
def corpus_watch(tmp_path_factory):
    project = build_project(tmp_path_factory.mktemp("corpus_watch"), WATCHED)
    w = Watcher(project, "--cold")
    result = {"project": project}
    try:
        w.wait(lambda e: e["event"] == "watch_started", 30, "watch_started")
        everyone = {f"corpus/{n}" for n in WATCHED}
        w.wait(
            lambda e: e["event"] == "run_finished"
            and {x["candidate"] for x in list(w.events) if x["event"] == "run_finished"} >= everyone,
            300,
            "every watched file's first run",
        )
        run_ids = {e["run_id"] for e in w.events if e["event"] == "run_queued"}
        # Checked while the watcher runs: its exit would kill leftovers anyway.
        result["strays"] = stage_processes(run_ids, root=w.proc.pid)
        result["pids"] = {name: alive(pid) for name, pid in recorded_pids(project).items()}
        # Still responsive: a save after all that gets its verdict.
        good = project / "corpus" / "good.py"
        good.write_text(good.read_text() + "\n# saved again after the hostile files\n")
        result["resave"] = w.run_finished("corpus/good.py", sha(good), timeout=90)
        result["alive_before_stop"] = w.proc.poll() is None
    finally:
        result["rc"] = w.stop(30)
        result["stderr"] = w.stderr
    result["events"] = list(w.events)
    return result


def test_watch_gives_every_file_its_expected_status(corpus_watch):
    first = []
    seen = set()
    for e in corpus_watch["events"]:  # each file's first run (good.py runs twice)
        if e["event"] in ("run_finished", "stage_finished") and (e["candidate"], e["run_id"]) not in seen:
            if e["event"] == "run_finished":
                seen.add((e["candidate"], e["run_id"]))
            first.append(e)
    assert check_statuses(first, WATCHED) == []


def test_watch_stays_up_and_responds(corpus_watch):
    assert corpus_watch["alive_before_stop"]
    assert corpus_watch["resave"]["status"] == "passed"
    assert corpus_watch["rc"] == 0, corpus_watch["stderr"][-3000:]
    assert corpus_watch["events"][-1]["event"] == "watch_stopped"


def test_watch_leaves_no_stage_process(corpus_watch):
    assert corpus_watch["strays"] == []
    assert set(corpus_watch["pids"]) and not any(corpus_watch["pids"].values())


def test_watch_records_every_finished_stage(corpus_watch):
    assert history_covers(corpus_watch["project"], corpus_watch["events"]) == []
