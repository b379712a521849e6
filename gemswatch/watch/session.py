"""One gemswatch session: the config, the mapping, the jobs and the events.

Both ``gemswatch [DIR]`` and ``gemswatch run`` drive a Session; the watcher
only adds the file-system loop and the dashboard on top.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from .config import Config, ConfigError, load_config
from .dependencies import DependencyIndex
from .devices import DeviceInfo
from .environment import EnvironmentTags
from .events import EventBus, headline
from .failed_cases import failed_nodeids
from .filters import Change
from .history import History, new_run_id
from .mapping import Candidate, CandidateMap
from .notes import Note
from .scheduler import Scheduler
from .stage import Run, SpareExecutor, StageExecutor, StagePlan, StageResult, StageRunner, Stages, WarmForkExecutor
from .stage.plan import base_env
from .stage.run import start_run
from .stage.tamper import ProjectGuard
from .stage.spares import SpareStarter, spares_per_slot, spares_wanted
from .stage.warm import WarmStarter
from .status import ALL_SKIPPED, ERROR, NOT_RUN, PASSED, STAGES, SUPERSEDED
from .summary import latest_result

__all__ = ["Session", "pipeline_stages"]

def pipeline_stages(policy: str) -> list[str]:
    """Stages of a save under a benchmark policy (``manual`` waits for a key)."""
    return ["preflight", "correctness"] + (["benchmark"] if policy == "auto" else [])


class Session:
    """Runs candidates' pipelines and keeps the bookkeeping of a session.

    Args:
        config: a validated config.
        device: the devices stages may use.
        bus: where events go (sinks are attached by the caller).
        jobs: stages at once (None: the config's, else the device default).
        benchmark: a policy that overrides the config's.
        config_path / watch_override: for reloading config.yaml.
        notify: receives human notes (unmapped files, reload messages).
        stages: runs the stages (tests inject fakes; no warm pool then);
            default: :class:`~.stage.Stages` forking from a warm pool.
        warm: False starts every stage cold (``--cold``); None follows the
            config's ``warm:``.
        spares: False turns spare stages off (``--no-spares``); None follows
            the config's ``spares:`` (read at start: switching between spares
            and the warm pool takes a restart).
        executor: runs the stages instead of the warm pool (a Ray
            cluster's :class:`~.stage.ray.RayExecutor`); its stages start
            cold and every one holds its device slot alone when
            ``device.exclusive``.
    """

    def __init__(
        self,
        config: Config,
        device: DeviceInfo,
        bus: EventBus,
        *,
        jobs: int | None = None,
        benchmark: str | None = None,
        watch_override: Path | None = None,
        notify: Callable[[str], None] | None = None,
        stages: StageRunner | None = None,
        warm: bool | None = None,
        seed: int | None = None,
        executor: StageExecutor | None = None,
        spares: bool | None = None,
    ):
        self.seed_override = seed  # the correctness stages' --seed, kept across reloads
        self.config = config if seed is None else replace(config, seed=seed)
        self.device = device
        self.bus = bus
        self.jobs_override = jobs
        self.benchmark_override = benchmark
        self.watch_override = watch_override
        self._notify: Callable[[str], None] | None = None
        self._early_notes: list[str] = []  # notes before anyone listens (the pool starts at once)
        self._notes_lock = threading.Lock()
        if notify is not None:
            self.notify = notify
        self.map = CandidateMap(config)
        self.history = History(config.state_dir)
        self._lock = threading.RLock()
        self._seq = 0
        self._last_key: dict[str, tuple[str, str]] = {}
        self.deps = DependencyIndex()
        self._unmapped_seen: set[str] = set()
        self._speedup_prev: dict[str, float] = {}
        self._cases_prev: dict[str, dict[str, float | None]] = {}  # candidate -> case -> speedup, last passing benchmark
        self.last_runs: dict[str, dict[str, Any]] = {}  # candidate rel -> run_finished
        self.last_stages: dict[str, dict[str, dict[str, Any]]] = {}
        self.config_error: str | None = None
        self.history_error: str | None = None  # why results of this session are missing from history.jsonl
        self.listeners: list[Callable[[], None]] = []  # told when the candidate list changes
        self.warm_override = warm
        self.warm: WarmStarter | SpareStarter | None = None
        self.guard = ProjectGuard()  # the files stages are judged by
        self.closers: list[Callable[[], None]] = []  # called once the stages are stopped (a Ray cluster's shutdown)
        if stages is None and executor is not None:
            stages = Stages(executor, self.guard)
        if stages is None and spares is not False and warm is not False and spares_wanted(config.spares, device.kind):
            # a stage is a spare process started ahead of need when one fits
            self.warm = SpareStarter(notify=lambda text: self.notify(text), log_path=config.state_dir / "warm.log")
            self._configure_warm()
            stages = Stages(SpareExecutor(self.warm), self.guard)
        if stages is None:
            # a stage is forked from the warm pool when it can be
            self.warm = WarmStarter(notify=lambda text: self.notify(text), log_path=config.state_dir / "warm.log")
            self._configure_warm()
            stages = Stages(WarmForkExecutor(self.warm), self.guard)
        self._stages = stages
        cands = self.map.candidates()
        self._fps = {str(c.path): c.fingerprint(config) for c in cands}
        self.scan_dependencies(cands)
        # `f` and speedup changes survive a restart, and so does each file's
        # last verdict: a run stopped before its end (a newer save, quitting)
        # has none, so its records are left out.
        records = list(self.history.records())
        stopped = {r.get("run_id") for r in records if r["event"] == "run_finished" and r.get("status") == SUPERSEDED}
        for rec in records:
            if rec.get("run_id") not in stopped:
                self._track(rec)
        if self.history.unreadable:
            self._note(f"{self.history.unreadable}: earlier verdicts are not shown")
        if self.history.skipped:
            self._note(f"{self.history.path}: skipped {self.history.skipped} line(s) that are not gemswatch records "
                       "(torn, or written by something else); the rest of the history is kept")
        self._environment: EnvironmentTags | None = None
        bus.subscribe(self._tag)  # before the history: every line it writes carries the tags
        bus.subscribe(self._keep)
        bus.subscribe(self._track)
        exclusive = frozenset(STAGES) if device.exclusive else frozenset({"benchmark"})
        self.scheduler = Scheduler(self, bus.emit, self.jobs, device.slots, exclusive_stages=exclusive)

    # -- properties -----------------------------------------------------------

    @property
    def notify(self) -> Callable[[str], None]:
        """Where human notes go; notes sent before one is set are kept for it."""
        return self._note

    @notify.setter
    def notify(self, fn: Callable[[str], None]) -> None:
        with self._notes_lock:
            self._notify = fn
            early, self._early_notes = self._early_notes, []
        for text in early:
            fn(text)

    def _note(self, text: str) -> None:
        with self._notes_lock:
            fn = self._notify
            if fn is None:
                self._early_notes = (self._early_notes + [text])[-20:]
                return
        fn(text)

    @property
    def jobs(self) -> int:
        if self.jobs_override:
            return self.jobs_override
        if self.config.jobs:
            return self.config.jobs
        return self.device.default_jobs()

    @property
    def policy(self) -> str:
        return self.benchmark_override or self.config.benchmark

    def candidates(self) -> list[Candidate]:
        return self.map.candidates()

    def last_stage_records(self) -> dict[str, dict[str, dict[str, Any]]]:
        """candidate -> stage -> its latest stage_finished record (the history
        file's included): a copy."""
        with self._lock:
            return {cand: dict(stages) for cand, stages in self.last_stages.items()}

    # -- events ---------------------------------------------------------------

    @property
    def environment(self) -> EnvironmentTags:
        """The tags of this session's results (rebuilt when config.yaml's project or python changes)."""
        cfg = self.config
        env = self._environment
        if env is None or (env.project, env.python) != (cfg.project, cfg.python):
            gpu = self.device.gpus[0] if self.device.kind == "cuda" and self.device.gpus else None
            env = self._environment = EnvironmentTags(cfg.project, cfg.python, gpu, cfg.watch)
        return env

    def _tag(self, record: dict[str, Any]) -> None:
        """Give a finished stage or run the environment it was measured in."""
        if record.get("event") in ("stage_finished", "run_finished"):
            record["env"] = self.environment.tags()

    def _keep(self, record: dict[str, Any]) -> None:
        """Append a finished stage or run to the history; a failed write is
        said once (and ``gemswatch run`` does not exit 0 for it)."""
        try:
            self.history.sink(record)
        except OSError as e:
            first = self.history_error is None
            self.history_error = (f"cannot write {e.filename or self.history.path} ({e.strerror or e}): results are "
                                  f"not kept in history; make {self.history.path} a file gemswatch can append to "
                                  f"(in a writable folder)")
            if first:
                self.notify(self.history_error)

    def _track(self, record: dict[str, Any]) -> None:
        ev = record.get("event")
        cand = record.get("candidate")
        if ev == "run_finished" and cand:
            with self._lock:
                self.last_runs[cand] = record
        elif ev == "stage_finished" and cand:
            with self._lock:
                self.last_stages.setdefault(cand, {})[record["stage"]] = record
                ratio, _ = headline(record)
                if record["stage"] == "benchmark" and record.get("status") == PASSED and ratio is not None:
                    self._speedup_prev[cand] = ratio
                    self._cases_prev[cand] = {
                        str(c.get("case")): headline(c)[0] for c in record.get("per_case") or [] if isinstance(c, dict)
                    }

    def _configure_warm(self) -> None:
        if self.warm is None:
            return
        cfg = self.config
        enabled = cfg.warm and self.warm_override is not False
        why = "--cold" if self.warm_override is False else f"warm: false in {cfg.path.name}"
        if isinstance(self.warm, SpareStarter):
            slots = self.device.slots
            self.warm.configure(
                enabled=self.warm_override is not False and spares_wanted(cfg.spares, self.device.kind),
                python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=base_env(cfg),
                slots=slots, per_slot=spares_per_slot(self.jobs, len(slots)), cuda=self.device.kind == "cuda",
                why_off=f"spares: {cfg.spares} in {cfg.path.name}",
            )
            return
        self.warm.configure(
            enabled=enabled, python=cfg.python, cwd=cfg.project, preload=cfg.preload, env=base_env(cfg), why_off=why
        )

    # -- the stage runner the scheduler sees ----------------------------------

    def plan(self, run: Run, stage: str, device: str | None) -> StagePlan:
        return self._stages.plan(run, stage, device)

    def execute(self, run: Run, plan: StagePlan) -> StageResult:
        """Run the stage; a benchmark's result gets the candidate's previous
        passing speedup, which only the session knows."""
        result = self._stages.execute(run, plan)
        if result.stage != "benchmark":
            return result
        with self._lock:
            before = self._cases_prev.get(run.candidate.rel, {})
            per_case = tuple({**c, "prev": before.get(c["case"])} for c in result.per_case)
            return replace(result, speedup_prev=self._speedup_prev.get(run.candidate.rel), per_case=per_case)

    # -- runs -----------------------------------------------------------------

    def trigger(
        self,
        path: Path,
        reason: str = "save",
        *,
        force: bool = False,
        stages: list[str] | None = None,
        failed_first: tuple[str, ...] = (),
    ) -> Run | None:
        """Snapshot ``path`` and queue its pipeline, unless its bytes and
        pipeline are unchanged since its last run (``force`` re-runs anyway).
        ``failed_first``: test node ids its correctness stage runs first."""
        cand = self.map.lookup(Path(path))
        if cand is None:
            return None
        try:
            data = cand.path.read_bytes()
        except OSError:
            return None
        sha = hashlib.sha256(data).hexdigest()
        fp = cand.fingerprint(self.config)
        key = str(cand.path)
        stages = stages or pipeline_stages(self.policy)
        with self._lock:
            if not force and self._last_key.get(key) == (sha, fp):
                return None
            self._last_key[key] = (sha, fp)
            self._fps[key] = fp
            self._seq += 1
            seq = self._seq
        self.deps.index(cand, data, self.config, self.map)
        run_id = new_run_id(cand.path.stem, sha)
        try:
            run = start_run(
                self.history.run_dir(run_id),
                run_id=run_id,
                candidate=cand,
                source=data,
                sha256=sha,
                stages=stages,
                config=self.config,
                reason=reason,
                fingerprint=fp,
                seq=seq,
                failed_first=failed_first,
            )
        except OSError as e:
            with self._lock:
                self._last_key.pop(key, None)  # the next change of the file tries again
            self._not_kept(cand, run_id, sha, stages, reason, e)
            return None
        self.scheduler.submit(run)
        return run

    def _not_kept(self, cand: Candidate, run_id: str, sha: str, stages: list[str], reason: str, error: OSError) -> None:
        """A save whose run folder cannot be written: an ``error`` on its row
        (the first stage) that names the folder and the fix."""
        runs = self.history.runs
        where = error.filename or runs
        message = (f"this save was not run: cannot write {where} ({error.strerror or error}); "
                   f"make {runs} a writable folder, the next change of the file tries again")
        fields = {"run_id": run_id, "candidate": cand.rel, "content_sha256": sha, "operators": cand.ops,
                  "functions": dict(cand.operators)}
        self.bus.emit("run_queued", **fields, stages=list(stages), reason=reason, run_dir="")
        results = [StageResult(stages[0], ERROR, message=message)]
        results += [StageResult(s, NOT_RUN, message=f"{s} not run: {stages[0]} {ERROR}") for s in stages[1:]]
        for r in results:
            self.bus.emit("stage_finished", **fields, **r.event_fields())
        self.bus.emit("run_finished", **fields, status=ERROR, stages={r.stage: r.status for r in results},
                      duration_s=0.0, message=message)

    def run_all(self, reason: str = "start", force: bool = True) -> list[Run]:
        runs = []
        for c in self.candidates():
            r = self.trigger(c.path, reason, force=force)
            if r is not None:
                runs.append(r)
        return runs

    def rerun_failed(self) -> list[Run]:
        """Run every file whose last run did not pass again; the cases its
        last correctness stage failed run first, then the rest."""
        runs = []
        with self._lock:
            failing = {c for c, rec in self.last_runs.items() if rec.get("status") not in (PASSED, ALL_SKIPPED)}
            reports = {c: (stages.get("correctness") or {}).get("report") for c, stages in self.last_stages.items()}
        for c in self.candidates():
            if c.rel in failing:
                first = failed_nodeids(reports.get(c.rel))
                r = self.trigger(c.path, "rerun failed", force=True, failed_first=first)
                if r is not None:
                    runs.append(r)
        return runs

    def benchmark_now(self, rels: Iterable[str] | None = None) -> list[Run]:
        """Benchmark the given candidates (default: all). A file whose current
        bytes already passed correctness only runs the benchmark stage."""
        wanted = None if rels is None else set(rels)
        runs = []
        for c in self.candidates():
            if wanted is not None and c.rel not in wanted:
                continue
            stages = ["preflight", "correctness", "benchmark"]
            try:
                sha = hashlib.sha256(c.path.read_bytes()).hexdigest()
            except OSError:
                continue
            with self._lock:
                last = self.last_stages.get(c.rel, {}).get("correctness")
            if last and last.get("content_sha256") == sha and last.get("status") in (PASSED, ALL_SKIPPED):
                stages = ["benchmark"]
            r = self.trigger(c.path, "benchmark", force=True, stages=stages)
            if r is not None:
                runs.append(r)
        return runs

    # -- changes --------------------------------------------------------------

    def scan_dependencies(self, candidates: list[Candidate] | None = None) -> None:
        """Index every mapped file's dependencies (without running anything);
        ``candidates``: the mapped files, when the caller has just listed them."""
        self.deps.scan(self.candidates() if candidates is None else candidates, self.config, self.map)

    def handle_changes(self, batch: Iterable[tuple[Change, str]]) -> None:
        """React to one debounced batch of (change, absolute path)."""
        paths: dict[str, Change] = {}
        for change, path in batch:
            paths[path] = change  # the last change of a path wins
        if self.warm is not None:
            self.warm.note_changes(paths)
        if any(Path(p) == self.config.path for p in paths):
            self.reload_config()
        touched: dict[str, str] = {}
        for p, change in paths.items():
            path = Path(p)
            if path == self.config.path:
                continue
            cand = self.map.lookup(path)
            if cand is not None:
                if path.exists():
                    touched.setdefault(str(path), "save")
                else:
                    self._forget(cand)
                continue
            if self.guard.ignores(path):
                continue  # a running stage is judged by it (its end decides), or its bytes are unchanged
            deps = self.deps.dependents(path)
            hint = not deps and path.suffix == ".py" and path.exists() and self._in_watch(path)
            if hint:
                # a helper the index has not seen imported yet (created after its importer)
                deps = self.deps.importers(path, self.candidates(), self.config, self.map)
                hint = not deps
            for d in deps:
                touched[d] = f"changed {self.config.rel(path)}"
            if hint:
                rel = self.config.rel(path)
                if rel not in self._unmapped_seen:
                    self._unmapped_seen.add(rel)
                    self.notify(Note(
                        f"{rel} is not mapped: add it to {self.config.path.name} under `candidates:`"
                        f" (or run `gemswatch new OP`)",
                        about=rel,
                    ))
        for p, reason in touched.items():
            self.trigger(Path(p), reason, force=reason != "save")

    def _in_watch(self, path: Path) -> bool:
        try:
            path.relative_to(self.config.watch)
            return True
        except ValueError:
            return False

    def _forget(self, cand: Candidate) -> None:
        key = str(cand.path)
        self.scheduler.cancel(key, f"{cand.rel} was deleted")
        self._drop(key)
        for cb in self.listeners:
            cb()

    def _drop(self, key: str) -> None:
        """Forget a file's last run key and dependencies (deleted or unmapped)."""
        with self._lock:
            self._last_key.pop(key, None)
        self.deps.forget(key)

    def reload_config(self) -> bool:
        """Load config.yaml again; a bad edit keeps the last good config."""
        try:
            new = load_config(self.config.path, self.watch_override)
        except ConfigError as e:
            self.config_error = str(e)
            self.bus.emit(
                "config_error",
                config=str(self.config.path),
                errors=[i.to_dict() for i in e.issues],
                errors_text=[str(i) for i in e.issues],
                kept_last_good=True,
            )
            return False
        if self.seed_override is not None:
            new = replace(new, seed=self.seed_override)
        old_map = self.map
        old_cands = {str(c.path): c for c in old_map.candidates()}
        self.config = new
        self.map = CandidateMap(new)
        self.config_error = None
        if not self.jobs_override:
            self.scheduler.set_jobs(self.jobs)
        self._configure_warm()
        self.bus.emit("config_reloaded", config=str(new.path))  # clears a shown config error
        self.notify(f"{new.path.name} reloaded")
        cands = self.map.candidates()
        self._unmapped_seen -= {c.rel for c in cands}  # unmapped again later: hinted again
        for c in cands:
            key = str(c.path)
            old_cands.pop(key, None)
            fp = c.fingerprint(new)
            if self._fps.get(key) != fp:
                self._fps[key] = fp
                self.trigger(c.path, "config changed")
        self.scan_dependencies(cands)
        for key, c in old_cands.items():
            self.scheduler.cancel(key, f"{c.rel} is no longer mapped")
            self._fps.pop(key, None)
            self._drop(key)
        for cb in self.listeners:
            cb()
        return True

    def watch_roots(self) -> list[tuple[Path, bool]]:
        """(folder, recursive) pairs the watcher must observe."""
        roots: dict[Path, bool] = {self.config.watch: True}
        roots.setdefault(self.config.path.parent, False)
        for d in self.deps.files():
            parent = d.parent
            if self._in_watch(parent):
                continue
            roots.setdefault(parent, False)
        return sorted(roots.items())

    # -- summary --------------------------------------------------------------

    def summary(self, only: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The latest result of every mapped candidate (or of those in ``only``)."""
        keep = None if only is None else set(only)
        out = []
        for c in self.candidates():
            if keep is None or c.rel in keep:
                with self._lock:
                    out.append(latest_result(c, self.last_runs.get(c.rel), dict(self.last_stages.get(c.rel, {}))))
        return out

    def stop(self) -> None:
        self.scheduler.stop()
        if self.warm is not None:
            self.warm.shutdown()
        closers, self.closers = self.closers, []
        for close in closers:
            close()
