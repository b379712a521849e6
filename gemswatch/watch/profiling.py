"""Profile one benchmark case of a candidate: ``gemswatch profile`` and the dashboard's key.

:func:`profile_case` replays exactly one case with ``--profile-only``
inside the capture scope of :mod:`gemswatch.testing.profile_capture`, as a
run of its own: a new run folder under ``.gemswatch/runs/`` holds the
snapshot of the file, ``profile.cmd``, ``profile.log``, the provider's
``profile.json`` and the profiler's report (``profile.ncu-rep`` from ncu,
``trace.json`` from the torch profiler). ncu is used where the stages run
on a GPU and ``ncu --version`` works; when it is missing or its run fails,
the torch profiler (CUDA activity on a GPU, CPU activity otherwise).
:func:`choose_case` picks the case a plain ``p`` profiles: the worst
headline ratio of the file's last benchmark (:func:`worst_case`).
Profiles are not history records.

Blocking: call it from a worker thread where a screen must stay live.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config
from .devices import detect_devices
from .history import History, new_run_id
from .mapping import Candidate
from .profile_summary import Kernel, kernels_of_report, ncu_kernels, summary_lines
from .stage.executor import ProcessExecutor, StageExecutor
from .stage.plan import StagePlan, stage_command, stage_env
from .stage.pytest_log import first_failure_line, first_line, usage_error
from .stage.run import start_run

__all__ = ["CaseChoice", "NoCase", "ProfileResult", "choose_case", "profile_case", "worst_case", "PROVIDER",
           "NCU_METRICS"]

PROVIDER = "gemswatch.testing.profile_capture"  # the capture plugin, loaded with -p
NCU_METRICS = "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum"
_NCU_IMPORT_TIMEOUT = 120


@dataclass(frozen=True)
class CaseChoice:
    """A benchmark case to profile: its id, operator, label and the bytes
    one call moves (None when the benchmark did not give them)."""

    case_id: str
    operator: str = ""
    label: str = ""
    case_bytes: float | None = None


@dataclass(frozen=True)
class ProfileResult:
    """How a profile went: ``lines`` is the three-line summary when ``ok``,
    ``message`` the reason otherwise; ``report`` the profiler's file."""

    ok: bool
    tool: str
    case_id: str
    run_dir: Path
    log: Path
    report: Path | None = None
    lines: list[str] = field(default_factory=list)
    message: str = ""
    note: str = ""  # why the torch profiler stood in for ncu


def _case_bytes(row: dict[str, Any], record: dict[str, Any]) -> float | None:
    """Bytes one call of the case moves: the row's ``bytes``, or achieved
    GB/s times latency, from the history row or else the benchmark's report."""
    if isinstance(row.get("bytes"), (int, float)) and row["bytes"] > 0:
        return float(row["bytes"])
    def of(gbps: Any, ms: Any) -> float | None:
        if isinstance(gbps, (int, float)) and isinstance(ms, (int, float)) and gbps > 0 and ms > 0:
            return float(gbps) * 1e9 * float(ms) * 1e-3
        return None

    got = of(row.get("gbps"), row.get("latency_ms"))
    if got is not None or not record.get("report"):
        return got
    try:
        report = json.loads(Path(record["report"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for b in report.get("benchmarks") or [] if isinstance(report, dict) else []:
        for c in (b.get("cases") or []) if isinstance(b, dict) else []:
            if isinstance(c, dict) and c.get("case_id") == row.get("case"):
                return of(c.get("gbps"), c.get("latency"))
    return None


def worst_case(records: list[dict[str, Any]], candidate_rel: str, case_id: str | None = None) -> CaseChoice | None:
    """The case of ``candidate_rel``'s last benchmark in ``records`` with the
    worst speedup (or the one named ``case_id``), None when there is none."""
    from .case_table import case_rows, last_benchmark

    pick = last_benchmark(records, candidate_rel)
    rows = case_rows(pick) if pick is not None else []
    if case_id is not None:
        rows = [r for r in rows if r.get("case") == case_id]
    if not rows:
        return None
    row = rows[0]
    return CaseChoice(str(row.get("case")), str(row.get("operator") or ""), str(row.get("label") or ""),
                      _case_bytes(row, pick.record) if pick else None)


class NoCase(ValueError):
    """No case to profile can be named: the message says what to do."""


def choose_case(config: Config, candidate: Candidate, case_id: str | None = None) -> tuple[Candidate, CaseChoice]:
    """The case a profile of ``candidate`` replays (``case_id``, or the worst
    of its last benchmark in the history) and the candidate narrowed to that
    case's operator, whose benchmark selection the replay runs.

    Raises:
        NoCase: no benchmark of the file is in the history and no id was
            given, or the file maps several operators and the case's is unknown.
    """
    records = list(History(config.state_dir).records())
    choice = worst_case(records, candidate.rel, case_id)
    if choice is None and case_id is None:
        raise NoCase(f"{candidate.rel} has no benchmarked case in the history: run "
                     f"`gemswatch run {candidate.rel} --benchmark auto` first, or pass --case-id ID")
    if choice is None:  # an id the last benchmark did not time: the stage's --case-id check judges it
        choice = CaseChoice(case_id or "")
    if choice.operator:
        pairs = tuple((op, fn) for op, fn in candidate.operators if op == choice.operator)
        if pairs:
            return Candidate(candidate.path, candidate.rel, pairs, candidate.pattern), choice
        return candidate, choice
    if len(candidate.ops) > 1:
        raise NoCase(f"{candidate.rel} maps {', '.join(candidate.ops)}; give a --case-id its last benchmark "
                     "timed, so the case's operator is known")
    return candidate, choice


def _pick_tool(device_kind: str) -> tuple[str, str]:
    """("ncu", "") where ncu can profile, else ("torch", why not ncu)."""
    if device_kind != "cuda":
        return "torch", ""
    ncu = shutil.which("ncu")
    if ncu is None:
        return "torch", "ncu is not installed (not on PATH)"
    try:
        ok = subprocess.run([ncu, "--version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError) as e:
        return "torch", f"ncu --version failed: {e}"
    return ("ncu", "") if ok else ("torch", "ncu --version failed")


def _command(config: Config, candidate: Candidate, snapshot: Path, run_dir: Path, case_id: str, tool: str) -> list[str]:
    cmd = stage_command(config, candidate, "benchmark", snapshot, run_dir / "unused.json")
    if cmd is None:
        raise ValueError(f"no benchmark selection for {', '.join(candidate.ops)} in {config.path.name}")
    cut = cmd.index("--record")  # --profile-only writes no timing report
    cmd = cmd[:cut] + cmd[cut + 4:] + ["-p", PROVIDER, "--profile-report-dir", str(run_dir), "--profile-tool", tool,
                                       "--profile-only", "--case-id", case_id]
    if tool == "ncu":
        ncu = shutil.which("ncu") or "ncu"
        cmd = [ncu, "--profile-from-start", "off", "--target-processes", "all", "--metrics", NCU_METRICS,
               "--export", str(run_dir / "profile"), "--force-overwrite", *cmd]
    return cmd


def _execute(config: Config, candidate: Candidate, run, case_id: str, tool: str, device: str | None,
             cancel: threading.Event, executor: StageExecutor) -> tuple[int | None, str]:
    """Run the replay once; (exit code, log's first failure or '')."""
    cmd = _command(config, candidate, run.snapshot, run.run_dir, case_id, tool)
    env = stage_env(config, candidate, run.run_id, device)
    plan = StagePlan(run_id=run.run_id, stage="profile", command=tuple(cmd), cwd=config.project, env=env,
                     log=run.run_dir / "profile.log", report=run.run_dir / "profile.json",
                     timeout=config.timeouts.get("benchmark"), grace=config.grace, device=device)
    (run.run_dir / "profile.cmd").write_text(plan.command_line + "\n", encoding="utf-8")
    outcome = executor.execute(plan, cancel)
    if outcome.cancelled:
        return None, "stopped"
    if outcome.timed_out:
        return None, f"timed out after {outcome.timeout_s:g}s"
    if outcome.returncode != 0:
        return outcome.returncode, _why_failed(_log_tail(plan.log), outcome.returncode)
    return 0, ""


def _why_failed(tail: str, rc: int) -> str:
    """The reason a replay's log gives: a usage error, the harness's own
    ``gemswatch: ... failed`` line (an unknown case id), or the first failure."""
    if rc == 4:
        return usage_error(tail) or "pytest usage error"
    harness = [ln.strip() for ln in tail.splitlines() if ln.startswith("gemswatch: ") and "failed" in ln]
    return first_line(harness[-1].removeprefix("gemswatch: ")) if harness else (
        first_failure_line(tail) or f"exit code {rc}")


def profile_case(config: Config, candidate: Candidate, case: CaseChoice, *,
                 cancel: threading.Event | None = None, executor: StageExecutor | None = None) -> ProfileResult:
    """Replay ``case`` of ``candidate``'s current bytes under a profiler; see the module doc.

    ``candidate`` should map only the operator of the case (its benchmark
    selection is what runs: :func:`choose_case` narrows it). ``executor``
    runs the replay (default: a fresh process; the watcher's warm executor
    forks a torch-profiler replay from its pool, and starts an ncu one cold
    since ncu must start the process). Never raises for a candidate that
    fails: the result says why.
    """
    cancel = cancel or threading.Event()
    executor = executor or ProcessExecutor()
    source = candidate.path.read_bytes()
    sha = hashlib.sha256(source).hexdigest()
    history = History(config.state_dir)
    run_id = new_run_id(candidate.path.stem + "-profile", sha)
    run = start_run(history.run_dir(run_id), run_id=run_id, candidate=candidate, source=source, sha256=sha,
                    stages=["profile"], config=config, reason="profile", fingerprint="", seq=0)
    info = detect_devices(dict(stage_env(config, candidate, run_id, None)))
    device = info.slots[0]
    tool, note = _pick_tool(info.kind)
    rc, why = _execute(config, candidate, run, case.case_id, tool, device, cancel, executor)
    if rc != 0 and tool == "ncu" and rc is not None:
        note = f"ncu's run failed ({why}); the torch profiler stood in"
        tool = "torch"
        rc, why = _execute(config, candidate, run, case.case_id, tool, device, cancel, executor)
    log = run.run_dir / "profile.log"
    base = dict(tool=tool, case_id=case.case_id, run_dir=run.run_dir, log=log, note=note)
    if rc != 0:
        return ProfileResult(False, message=f"the replay of {case.case_id} failed: {why}", **base)
    try:
        report = json.loads((run.run_dir / "profile.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ProfileResult(False, message=f"the capture scope was never entered (no readable profile.json in "
                             f"{run.run_dir}); see {log}", **base)
    calls = 1
    if tool == "ncu":
        kernels, kind, path = _ncu_report(run.run_dir / "profile.ncu-rep"), "gpu", run.run_dir / "profile.ncu-rep"
    else:
        kernels, kind, path = kernels_of_report(report), str(report.get("kind") or ""), run.run_dir / "trace.json"
    return ProfileResult(True, report=path, lines=summary_lines(kernels, kind, calls, case.case_bytes), **base)


def _log_tail(path: Path, limit: int = 64 * 1024) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _ncu_report(path: Path) -> list[Kernel]:
    ncu = shutil.which("ncu") or "ncu"
    try:
        out = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw"], capture_output=True,
                             text=True, timeout=_NCU_IMPORT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return []
    return ncu_kernels(out.stdout) if out.returncode == 0 else []
