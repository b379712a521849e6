"""The candidate worker's sandbox (Landlock), tried in a forked child: what
a candidate may and may not do once it is in place."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from gemswatch.testing.isolation.sandbox import CACHE_VARS, CACHES_ENV, WRITABLE_ENV, landlock_abi, restrict
from gemswatch.warmpool.signal_scope import confine_signals

pytestmark = pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock")


def in_sandbox(project: Path, tries: dict, env: dict[str, str] | None = None, stage: bool = False) -> dict[str, str]:
    """Fork, sandbox the child with ``project`` protected, run each try there;
    what each did ('ok' or the error's type). ``stage``: confine the child's
    signals first, as every stage does before its worker starts."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.environ.update(env or {})
            if stage:
                assert confine_signals() is None
            box = restrict([project])
            out = {"active": str(box.active)}
            for name, attempt in tries.items():
                try:
                    attempt()
                    out[name] = "ok"
                except OSError as e:
                    out[name] = type(e).__name__
            os.write(write, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_a_sandboxed_candidate_writes_only_its_scratch_folder(tmp_path):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "config.yaml").write_text("candidates: {}\n")
    (project / "tests" / "test_op.py").write_text("def test_op(): pass\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    got = in_sandbox(project, {
        "config": lambda: (project / "config.yaml").write_text("hacked"),
        "test": lambda: (project / "tests" / "test_op.py").unlink(),
        "new file": lambda: (project / "conftest.py").write_text("x"),
        "outside": lambda: (outside / "x").write_text("x"),
        "scratch": lambda: Path(os.environ["TMPDIR"], "x").write_text("x"),
        "devnull": lambda: open(os.devnull, "w").close(),
        "judge memory": lambda: open(f"/proc/{os.getppid()}/mem", "rb").close(),
        "signal judge": lambda: os.kill(os.getppid(), signal.SIGCONT),
    })
    assert got.pop("active") == "True"
    assert got == {
        "config": "PermissionError", "test": "PermissionError", "new file": "PermissionError",
        "outside": "PermissionError", "scratch": "ok", "devnull": "ok", "judge memory": "PermissionError",
        "signal judge": "PermissionError" if landlock_abi() >= 6 else "ok",
    }
    assert (project / "config.yaml").read_text() == "candidates: {}\n"
    assert (project / "tests" / "test_op.py").exists()


def test_the_stage_may_name_more_writable_folders(tmp_path):
    project, logs = tmp_path / "project", tmp_path / "project" / "logs"
    logs.mkdir(parents=True)
    got = in_sandbox(project, {"logs": lambda: (logs / "x.txt").write_text("x"),
                               "project": lambda: (project / "x.txt").write_text("x")},
                     env={WRITABLE_ENV: str(logs)})
    assert (got["logs"], got["project"]) == ("ok", "PermissionError")


def test_a_cache_folder_that_holds_the_project_is_not_made_writable(tmp_path):
    # A project inside ~/.cache (say) must not become writable with it.
    cache = tmp_path / "cache"
    project = cache / "project"
    project.mkdir(parents=True)
    got = in_sandbox(project, {"project": lambda: (project / "x").write_text("x")},
                     env={"XDG_CACHE_HOME": str(cache)})
    assert got["project"] == "PermissionError"


def test_the_candidate_writes_caches_of_its_own_never_the_judges(tmp_path):
    # A compiled kernel or tuning choice planted in a cache the judge reads
    # would run in the judge (its gems and torch.compile baselines).
    project = tmp_path / "project"
    project.mkdir()
    judge = {var: tmp_path / "judge" / var.lower() for var in CACHE_VARS}
    for folder in judge.values():
        folder.mkdir(parents=True)
    env = {var: str(folder) for var, folder in judge.items()}
    env[CACHES_ENV] = str(tmp_path / "candidates")
    tries = {f"judge {var}": (lambda f=folder: (f / "planted").write_text("x")) for var, folder in judge.items()}
    tries.update({f"own {var}": (lambda v=var: _write_under(os.environ[v])) for var in CACHE_VARS})
    got = in_sandbox(project, tries, env=env)
    assert got.pop("active") == "True"
    assert got == {**{f"judge {v}": "PermissionError" for v in CACHE_VARS}, **{f"own {v}": "ok" for v in CACHE_VARS}}
    assert not any((f / "planted").exists() for f in judge.values())
    assert all((tmp_path / "candidates" / v.lower() / "entry").exists() for v in CACHE_VARS)


def _write_under(folder: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    Path(folder, "entry").write_text("x")


def _cache_put(folder: str) -> None:
    # As Triton stores a compiled kernel: a file written in a temporary
    # folder of its own, then renamed into the cache's folder.
    entry = Path(folder, "KEY")
    temporary = entry / f"tmp.pid_{os.getpid()}"
    temporary.mkdir(parents=True, exist_ok=True)
    (temporary / "kernel.cubin").write_text("x")
    os.replace(temporary / "kernel.cubin", entry / "kernel.cubin")
    temporary.rmdir()


@pytest.mark.skipif(landlock_abi() < 6, reason="stages confine their signals from Landlock ABI 6 on")
def test_a_compiler_stores_into_its_cache_inside_a_stage(tmp_path):
    # Both layers at once, the stage's (signals) and the worker's (files): a
    # file moved between folders must be allowed by each (EXDEV otherwise,
    # which failed every kernel compiled on a GPU).
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "elsewhere" / "a").mkdir(parents=True)
    (tmp_path / "elsewhere" / "a" / "f").write_text("x")
    (project / "tests").mkdir()
    (project / "tests" / "test_op.py").write_text("def test_op(): pass\n")
    tries = {
        "cache": lambda: _cache_put(os.environ["TRITON_CACHE_DIR"]),
        "elsewhere": lambda: os.replace(tmp_path / "elsewhere" / "a" / "f", tmp_path / "elsewhere" / "f"),
        # A hard link in a writable folder to a test file would make the test writable.
        "link a test": lambda: os.link(project / "tests" / "test_op.py", Path(os.environ["TMPDIR"]) / "test_op.py"),
        "move a test in": lambda: os.replace(project / "tests" / "test_op.py", Path(os.environ["TMPDIR"]) / "t.py"),
    }
    got = in_sandbox(project, tries, env={CACHES_ENV: str(tmp_path / "candidates")}, stage=True)
    # Refused either way: EACCES, or EXDEV where Landlock refuses a link across folders.
    assert {k: v != "ok" for k, v in got.items()} == {"active": True, "cache": False, "elsewhere": True,
                                                       "link a test": True, "move a test in": True}
    assert got["active"] == "True"
    assert (project / "tests" / "test_op.py").read_text() == "def test_op(): pass\n"
    assert (tmp_path / "candidates" / "triton_cache_dir" / "KEY" / "kernel.cubin").exists()
