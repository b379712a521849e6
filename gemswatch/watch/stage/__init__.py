"""gemswatch.watch.stage: everything about running one stage.

It owns the way through a stage: its plan (command line, environment,
files: :mod:`.plan`), an executor that starts and supervises it
(:mod:`.executor`: a fresh local process, a fork from the warm pool or a
spare process started ahead of need (:mod:`.spares`), with
:mod:`.supervise` and :mod:`.reaper` making sure it stops and leaves
nothing behind), and the verdict read from its exit code, log and report
(:mod:`.verdict`), returned as one typed :class:`StageResult`.

It runs in the watcher process, so it imports the standard library and
``gemswatch.watch``'s config and mapping only: never torch, triton, pytest,
``gemswatch.gems`` or a candidate (those load in the stage process).
"""

from .executor import ProcessExecutor, SpareExecutor, StageExecutor, WarmForkExecutor
from .plan import StagePlan, plan_stage
from .result import Cases, Outcome, StageResult
from .run import Run, StageRunner, Stages, execute_stage

__all__ = [
    "Cases",
    "Outcome",
    "ProcessExecutor",
    "SpareExecutor",
    "Run",
    "StageExecutor",
    "StagePlan",
    "StageResult",
    "StageRunner",
    "Stages",
    "WarmForkExecutor",
    "execute_stage",
    "plan_stage",
]
