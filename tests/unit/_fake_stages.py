"""Fake stages for the scheduling and session tests: no processes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gemswatch.watch.stage import Run, StagePlan, StageResult


class FunctionStages:
    """A StageRunner whose stages are ``fn(run, stage, device) -> StageResult``."""

    def __init__(self, fn: Callable[[Run, str, "str | None"], StageResult]):
        self.fn = fn

    def plan(self, run: Run, stage: str, device: str | None) -> StagePlan:
        nowhere = Path("/nonexistent")
        return StagePlan(run.run_id, stage, None, nowhere, {}, nowhere / f"{stage}.log", nowhere / f"{stage}.json", None, 0.0, device)

    def execute(self, run: Run, plan: StagePlan) -> StageResult:
        return self.fn(run, plan.stage, plan.device)
