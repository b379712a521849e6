"""Warm vs spare vs cold: the same stage, forked from the warm pool, run by
a spare process started ahead of need (with the candidate's worker started
ahead too) or started as a fresh interpreter, gives the same verdict,
report and log.

The fake project of ``test_watch_e2e`` (plain-Python operators, no Triton)
keeps these fast; its pool preloads ``fakeops``, torch and pytest, the
modules every one of its stages imports anyway. The warm and the cold stage
of a case run side by side; the spare variant reuses the cold results.
Times and run folders are the only things allowed to differ (and where a
stopped stage was interrupted).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from _e2e_helpers import write_files
from test_watch_e2e import CONFIG, FILES

from gemswatch.watch.config import load_config
from gemswatch.watch.mapping import CandidateMap
from gemswatch.watch.stage import Run, execute_stage
from gemswatch.watch.stage.plan import base_env
from gemswatch.watch.stage.spares import SpareStarter
from gemswatch.watch.stage.supervise import run_process
from gemswatch.watch.stage.warm import WarmStarter

# The e2e project; its pool preloads what every one of its stages imports.
WARM_CONFIG = CONFIG.replace("  preflight: 4\n", "  preflight: 3\n") + "preload: [fakeops, torch, pytest]\n"

PROBE_TEST = '''\
import json, os, signal, sys, threading

import fakeops  # noqa: F401 - preloaded by the pool, imported by a cold stage


def test_process_state():
    """Everything a stage could tell about how it was started."""
    state = {
        "argv": [os.path.basename(sys.argv[0])] + sys.argv[1:],
        "orig_argv": sys.orig_argv[1:],
        "path": sys.path,
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k != "GEMSWATCH_RUN_ID"},
        "signals": {int(s): repr(signal.getsignal(s)) for s in signal.valid_signals()
                    if s not in (signal.SIGKILL, signal.SIGSTOP)},
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "leads_session": os.getpgid(0) == os.getpid() == os.getsid(0),
        "stdin": os.readlink("/proc/self/fd/0"),
        "fds": len(os.listdir("/proc/self/fd")),
        "main": sys.modules["__main__"].__spec__.name,
        "threads": threading.active_count(),
        "candidates": [m for m in sys.modules if m.startswith("gemswatch_candidate_")],
    }
    with open(os.environ["GEMSWATCH_RUN_ID"].split("-")[0] + "-probe.json", "w") as f:
        json.dump(state, f, sort_keys=True)
'''


@pytest.fixture(scope="module")
def proj(tmp_path_factory) -> Path:
    root = write_files(tmp_path_factory.mktemp("warmproj"), FILES)
    (root / "config.yaml").write_text(WARM_CONFIG)
    (root / "tests" / "test_probe.py").write_text(PROBE_TEST)
    return root


def steady_environment() -> None:
    """pytest sets PYTEST_CURRENT_TEST anew in every phase of every test; a
    watcher's environment does not change like that (the pool would be
    restarted for it)."""
    os.environ.pop("PYTEST_CURRENT_TEST", None)


@pytest.fixture(scope="module")
def starter(proj):
    cfg = load_config(proj / "config.yaml")
    notes: list[str] = []
    steady_environment()
    env = base_env(cfg)
    ws = WarmStarter(notify=notes.append, log_path=proj / ".gemswatch" / "warm.log")
    ws.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=env)
    ws.notes = notes
    yield ws
    ws.shutdown()


@pytest.fixture(scope="module")
def spares(proj):
    """Two spares at a time on the CPU slot, each with a pre-started worker
    (as on a GPU), so the handover of the worker is what these stages use."""
    cfg = load_config(proj / "config.yaml")
    notes: list[str] = []
    steady_environment()
    ss = SpareStarter(notify=notes.append, log_path=proj / ".gemswatch" / "spares.log")
    ss.configure(enabled=True, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=base_env(cfg),
                 per_slot=2, worker=True)
    ss.notes = notes
    yield ss
    ss.shutdown()


def run_stage(proj: Path, name: str, stage: str, warm: WarmStarter | SpareStarter | None, tag: str):
    steady_environment()
    cfg = load_config(proj / "config.yaml")
    cand = CandidateMap(cfg).lookup(proj / "cands" / name)
    data = cand.path.read_bytes()
    run_id = f"{tag}-{Path(name).stem}-{stage}"
    run_dir = proj / ".gemswatch" / "runs" / run_id
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "snapshot").mkdir(parents=True)
    snap = run_dir / "snapshot" / name
    snap.write_bytes(data)
    run = Run(run_id, cand, hashlib.sha256(data).hexdigest(), [stage], run_dir, snap, cfg)
    return execute_stage(run, stage, None, warm=warm), run_dir


_TIMES = re.compile(r"\d+(\.\d+)?s\b|\d+\.\d+")
_THREAD = re.compile(r"thread 0x[0-9a-f]+")
_SEED = re.compile(r"seed \d+")  # each stage draws its cases from a seed of its own
# The sandbox line names the worker's scratch folder and pid, new every stage.
_SANDBOX = re.compile(r"gemswatch-candidate-\w+|/proc/\d+")
# A crash dump (faulthandler) lists the whole stack; below pytest's frames a
# warm stage has the pool's (its only known difference from a cold one).
_BOTTOM_FRAMES = re.compile(r'^  File "(<frozen runpy>|<string>|[^"]*gemswatch/warmpool/server\.py)", line \d+ in \S+\n', re.M)


# Below the candidate worker's loop, a worker forked from the judge has the
# judge's frames and one started ahead by a spare its own entry point.
_BELOW_SERVE = re.compile(r'(worker\.py", line \d+ in serve\n)(  File "[^"]*", line \d+ in \S+\n)+')


def scrub(text: str, run_dir: Path, tag: str) -> str:
    text = text.replace(str(run_dir), "RUN").replace(run_dir.name, "RUN").replace(f"{tag}-", "TAG-")
    text = _BELOW_SERVE.sub(r"\1", text)
    text = _BOTTOM_FRAMES.sub("", _THREAD.sub("thread X", _SANDBOX.sub("X", text)))
    return _TIMES.sub("T", _SEED.sub("seed N", text))


def scrub_report(data, run_dir: Path, tag: str):
    if isinstance(data, dict):
        return {
            k: scrub_report(v, run_dir, tag)
            for k, v in data.items()
            if not any(w in k for w in ("time", "duration", "latency", "speedup", "created", "seed"))
        }
    if isinstance(data, list):
        return [scrub_report(v, run_dir, tag) for v in data]
    if isinstance(data, str):
        return scrub(data, run_dir, tag)
    return data


CASES = [
    ("good.py", "preflight", "passed"),
    ("good.py", "correctness", "passed"),
    ("wrong.py", "correctness", "failed"),
    ("ghost.py", "correctness", "uncalled"),
    ("syntax.py", "preflight", "error"),
    ("crash.py", "correctness", "crashed"),
    ("hang.py", "preflight", "timeout"),
]


_COLD: dict[tuple[str, str], tuple] = {}  # (file, stage) -> the cold stage's (result, run folder)


def side_by_side(proj: Path, name: str, stage: str, starter: WarmStarter | SpareStarter, tag: str = ""):
    """(warm result, warm run folder, cold result, cold run folder), run at
    once (the cold one only once per case and module)."""
    out: dict = {}
    cold = None
    if (name, stage) not in _COLD or tag:
        cold = threading.Thread(target=lambda: out.setdefault("cold", run_stage(proj, name, stage, None, f"cold{tag}")))
        cold.start()
    out["warm"] = run_stage(proj, name, stage, starter, f"warm{tag}")
    if cold is not None:
        cold.join(60)
        if not tag:
            _COLD[(name, stage)] = out["cold"]
    return (*out["warm"], *out.get("cold", _COLD[(name, stage)]))


@pytest.mark.parametrize("variant", ["warm", "spare"])
@pytest.mark.parametrize("name,stage,status", CASES, ids=[f"{n[:-3]}-{s}" for n, s, _ in CASES])
def test_warm_spare_and_cold_give_the_same_verdict_report_and_log(request, proj, variant, name, stage, status):
    starter = request.getfixturevalue("starter" if variant == "warm" else "spares")
    warm, warm_dir, cold, cold_dir = side_by_side(proj, name, stage, starter)
    assert (warm.warm, cold.warm) == (True, False), starter.notes
    assert warm.status == cold.status == status, (warm.message, cold.message)
    if status == "timeout":  # interrupted (2) or, past the 1 s grace on a loaded machine, killed (-9)
        assert {warm.exit_code, cold.exit_code} <= {2, -9}
    else:
        assert warm.exit_code == cold.exit_code
    assert warm.cases == cold.cases and warm.candidate_calls == cold.candidate_calls
    assert scrub(warm.message, warm_dir, "warm") == scrub(cold.message, cold_dir, "cold")
    assert warm.first_failure == cold.first_failure
    if status != "timeout":  # where a stopped stage was interrupted is a matter of timing
        wlog = scrub((warm_dir / f"{stage}.log").read_text(), warm_dir, "warm")
        clog = scrub((cold_dir / f"{stage}.log").read_text(), cold_dir, "cold")
        assert wlog == clog
    wrep, crep = warm_dir / f"{stage}.json", cold_dir / f"{stage}.json"
    assert wrep.exists() == crep.exists()
    if wrep.exists():
        assert scrub_report(json.loads(wrep.read_text()), warm_dir, "warm") == scrub_report(
            json.loads(crep.read_text()), cold_dir, "cold"
        )


@pytest.mark.parametrize("variant", ["warm", "spare"])
def test_a_warm_or_spare_stage_starts_like_a_fresh_interpreter(request, proj, variant):
    """argv, sys.path, environment, signal dispositions, session, stdio and
    open descriptors are what ``python -m pytest`` would have had."""
    starter = request.getfixturevalue("starter" if variant == "warm" else "spares")
    steady_environment()
    cfg = load_config(proj / "config.yaml")
    states = {}
    for tag, warm in ((variant, starter), ("cold", None)):
        if tag == "cold" and (proj / "cold-probe.json").exists():
            states[tag] = json.loads((proj / "cold-probe.json").read_text())  # the other variant's cold run
            continue
        cmd = [cfg.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_probe.py"]
        env = dict(base_env(cfg), PYTHONPATH=str(proj / "cands"), GEMSWATCH_RUN_ID=f"{tag}-x")
        out = run_process(cmd, cwd=proj, env=env, log_path=proj / f"{tag}-probe.log", timeout=20, cancel=threading.Event(), warm=warm)
        assert out.returncode == 0 and out.warm == (warm is not None), (proj / f"{tag}-probe.log").read_text()
        states[tag] = json.loads((proj / f"{tag}-probe.json").read_text())
    warm_state, cold_state = states[variant], states["cold"]
    assert warm_state["candidates"] == []
    assert warm_state["leads_session"] and warm_state["stdin"] == "/dev/null"
    if variant == "spare":
        # its one difference: the socket to the candidate's worker, started ahead
        assert warm_state.pop("fds") == cold_state.pop("fds") + 1
    assert warm_state == cold_state


def test_the_pool_never_imports_a_candidate(proj, starter):
    """Each stage loads its candidate in its own child; the pool stays clean,
    so a later stage of another file never sees an earlier one's module."""
    first, _ = run_stage(proj, "good.py", "correctness", starter, "clean1")
    second, _ = run_stage(proj, "wrong.py", "correctness", starter, "clean2")
    third, _ = run_stage(proj, "good.py", "correctness", starter, "clean3")
    assert (first.status, second.status, third.status) == ("passed", "failed", "passed")
    assert all(r.warm for r in (first, second, third))
    assert not any("restarting" in n for n in starter.notes), starter.notes


def test_server_and_watcher_agree_on_per_stage_keys():
    from gemswatch.warmpool import server as warm
    from gemswatch.watch.stage import warm as warmstart

    assert warm.PER_STAGE_KEYS == warmstart.PER_STAGE_KEYS
    assert warmstart.SERVER == Path(warm.__file__).resolve()
