"""A stage's plan: its exact command line, environment and files, built once.

Each stage is a fresh ``python -m pytest`` process in the project root with
one ``--override op:SNAPSHOT:func`` per mapped operator, where SNAPSHOT is
the copy of the candidate's bytes taken when the save was seen. The plan is
made once, before the stage starts: the ``stage_started`` event shows it,
the executor runs it, and its command line, log and report paths stay in
the run folder.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..config import Config
from ..failed_cases import FAILED_FIRST_OPTION
from ..mapping import Candidate, CandidateMap, local_imports, selection_for

# The override layer's variable (gemswatch.override.loading); the watcher does not import it.
IMPORT_PATH_ENV = "GEMSWATCH_IMPORT_PATH"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
CANDIDATE_CACHES_ENV = "GEMSWATCH_CANDIDATE_CACHES"  # sandbox.CACHES_ENV (watch does not import testing)
STAGE_COLUMNS = "240"  # the width pytest writes a stage's log at (config.yaml's env: may set COLUMNS)

if TYPE_CHECKING:
    from .run import Run

__all__ = ["StagePlan", "base_env", "candidate_cache_name", "plan_stage", "selection_kind", "stage_command", "stage_env"]


@dataclass(frozen=True)
class StagePlan:
    """Everything one stage process needs.

    ``command`` is None when the candidate's operators select nothing for
    this stage; ``why_not`` then says so and the stage is ``not_run``.
    ``warm`` says whether the executor will try the warm pool first.
    ``guarded`` are the project files the stage is judged by (its tests,
    benchmarks, conftests and their local helper modules): they must be the
    same after the stage as before it. ``snapshot`` is the copy of the
    candidate's bytes the command names and ``sha256`` their hash (an
    executor that runs the stage on another machine sends those bytes).
    """

    run_id: str
    stage: str
    command: tuple[str, ...] | None
    cwd: Path
    env: Mapping[str, str]
    log: Path
    report: Path
    timeout: float | None
    grace: float
    device: str | None
    warm: bool = False
    why_not: str = ""
    guarded: tuple[Path, ...] = ()
    snapshot: Path | None = None
    sha256: str = ""

    @property
    def command_line(self) -> str:
        return shlex.join(self.command) if self.command else ""


def selection_kind(stage: str) -> str:
    """The config selection a stage runs: ``tests`` or ``benchmark``."""
    return "tests" if stage == "correctness" else "benchmark"


def stage_command(config: Config, candidate: Candidate, stage: str, snapshot: Path, output: Path,
                  failed_first: Path | None = None) -> list[str] | None:
    """The exact argv of ``stage`` for ``candidate``, or None when the
    operators have no selection for it (a stage with nothing to run).
    ``failed_first``: a file of node ids the correctness stage runs first."""
    sel = selection_for(config, candidate.ops, selection_kind(stage))
    if not sel:
        return None
    cmd = [config.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sel.args]
    if stage in ("preflight", "benchmark"):
        cmd += ["--level", config.level]
    if stage == "preflight":
        cmd += ["--preflight-only"]
    if stage == "correctness" and config.seed is not None:
        cmd += ["--seed", str(config.seed)]  # replays the cases a report's seed drew
    if stage == "correctness" and failed_first is not None:
        cmd += [FAILED_FIRST_OPTION, str(failed_first)]
    for op, func in candidate.operators:
        cmd += ["--override", f"{op}:{snapshot}:{func}"]
    cmd += ["--record", "json", "--output", str(output)]
    return cmd


def base_env(config: Config) -> dict[str, str]:
    """The environment every stage of ``config`` shares: ours and the config's ``env``."""
    env = dict(os.environ)
    # pytest fits its short summary lines to COLUMNS (80 without a
    # terminal); the logs are read on wide screens and in $PAGER. The
    # verdict reads reports and line starts, never a width.
    env["COLUMNS"] = STAGE_COLUMNS
    env.update(config.env)
    env["PYTHONUNBUFFERED"] = "1"
    # No colour codes in the log files.
    env["PY_COLORS"] = "0"
    # Stages run side by side, about one per core. Each stage's torch would
    # otherwise start a thread per core for any op over 32768 elements, and
    # parallel stages would fight for the cores. A user's setting wins.
    env.setdefault("OMP_NUM_THREADS", "1")
    # Compiled kernels outlive the stage process in a folder of the project's
    # own, so a save that did not change a kernel does not compile it again.
    # A user's setting wins. The candidate's sandboxed worker gets caches of
    # its own beside it, which the judge never reads (sandbox.candidate_caches).
    env.setdefault(TRITON_CACHE_ENV, str(config.state_dir / "triton-cache"))  # never in a checkout project: names
    env.setdefault(CANDIDATE_CACHES_ENV, str(config.state_dir / "candidate-caches"))
    return env


def candidate_cache_name(path: Path) -> str:
    """The folder of one candidate file's compiler caches, beneath the
    candidates' caches: its versions share them (a kernel unchanged since
    the last save is not compiled again), other files never do, so no
    candidate can plant a compiled kernel that another one loads."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"{path.stem}-{digest}"


def stage_env(config: Config, candidate: Candidate, run_id: str, device: str | None) -> dict[str, str]:
    """The environment of a stage: :func:`base_env` plus the candidate's
    folder for its sibling imports, the run, and the device."""
    env = base_env(config)
    # The snapshot lives in the run folder; sibling helpers stay importable.
    # Not on PYTHONPATH: that would put the folder ahead of the standard
    # library and site-packages, and a sitecustomize.py or a module named
    # like a plugin next to the candidate would run in every stage. The
    # override layer appends it to sys.path when it loads the candidate.
    env[IMPORT_PATH_ENV] = str(candidate.path.parent)
    env["GEMSWATCH_RUN_ID"] = run_id  # no stage name: the candidate cannot tell a timed stage by it
    env[CANDIDATE_CACHES_ENV] = str(Path(env[CANDIDATE_CACHES_ENV]) / candidate_cache_name(candidate.path))
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env


def judged_by(config: Config, candidate: Candidate) -> tuple[Path, ...]:
    """The project files a candidate's stages are judged by: the operators'
    test and benchmark files with the conftests above them and the project's
    own modules those import (a shared test helper). config.yaml is not
    among them: a user's edit of it applies while stages run."""
    files = CandidateMap(config).selection_files(candidate.ops)
    helpers: set[Path] = set()
    for f in files:
        if f.suffix == ".py":
            try:
                helpers |= local_imports(f.read_bytes(), f, [f.parent, config.project])
            except OSError:
                continue
    inside = {h for h in helpers if h.is_relative_to(config.project)}
    return tuple(sorted(files | inside))


def plan_stage(run: "Run", stage: str, device: str | None, *, warm: bool = False) -> StagePlan:
    """The plan of ``stage`` of ``run`` on ``device``."""
    config = run.config
    report = run.run_dir / f"{stage}.json"
    cmd = stage_command(config, run.candidate, stage, run.snapshot, report, run.failed_first)
    why_not = "" if cmd is not None else (
        f"no {selection_kind(stage)} selection for {', '.join(run.candidate.ops)} in {config.path.name}"
    )
    return StagePlan(
        run_id=run.run_id,
        stage=stage,
        command=None if cmd is None else tuple(cmd),
        cwd=config.project,
        env=stage_env(config, run.candidate, run.run_id, device),
        log=run.run_dir / f"{stage}.log",
        report=report,
        timeout=config.timeouts.get(stage),
        grace=config.grace,
        device=device,
        warm=warm,
        why_not=why_not,
        guarded=judged_by(config, run.candidate) if cmd is not None else (),
        snapshot=run.snapshot,
        sha256=run.sha256,
    )
