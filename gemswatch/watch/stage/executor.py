"""The executor interface: how a planned stage is started and waited for.

An executor turns a :class:`~.plan.StagePlan` into an :class:`~.result.Outcome`:
it starts the stage process with the plan's command, folder and environment,
writes its output to the plan's log (the stage writes its own report),
enforces the plan's timeout, stops it when ``cancel`` is set, and leaves no
process of it behind. What the stage ended as is decided afterwards, the
same way for every executor (:mod:`.verdict`).

- :class:`ProcessExecutor`: a fresh ``python -m pytest`` process.
- :class:`WarmForkExecutor`: forked from the warm pool when it can be, else
  as :class:`ProcessExecutor` does.
- :class:`SpareExecutor`: a spare process started ahead of need (preloaded,
  its CUDA context up) becomes the stage when one fits, else as
  :class:`ProcessExecutor` does.

The last two differ only in their starter (:class:`~.warm.WarmStarter`,
:class:`~.spares.SpareStarter`), both a :class:`~.starter.StageStarter`:
the runner asks it for a process and falls back to a cold one, the same
code for both.
"""

from __future__ import annotations

import threading
from typing import Protocol

from .plan import StagePlan
from .result import Outcome
from .spares import SpareStarter
from .starter import StageStarter
from .supervise import run_process

__all__ = ["StageExecutor", "ProcessExecutor", "SpareExecutor", "WarmForkExecutor"]


class StageExecutor(Protocol):
    """Runs one planned stage to its end; never raises for a bad candidate."""

    @property
    def warm(self) -> bool:
        """True when stages are meant to start from the warm pool."""
        ...

    def execute(self, plan: StagePlan, cancel: threading.Event) -> Outcome:
        ...


def _run(plan: StagePlan, cancel: threading.Event, starter: StageStarter | None) -> Outcome:
    assert plan.command is not None, "a plan without a command has nothing to execute"
    return run_process(
        list(plan.command),
        cwd=plan.cwd,
        env=dict(plan.env),
        log_path=plan.log,
        timeout=plan.timeout,
        cancel=cancel,
        grace=plan.grace,
        warm=starter,
    )


class ProcessExecutor:
    """Each stage is a fresh process started from scratch."""

    warm = False

    def execute(self, plan: StagePlan, cancel: threading.Event) -> Outcome:
        return _run(plan, cancel, None)


class WarmForkExecutor:
    """Each stage is forked from the warm pool of ``starter`` when it can
    be, and started as a fresh process when it cannot."""

    def __init__(self, starter: StageStarter):
        self.starter = starter

    @property
    def warm(self) -> bool:
        return self.starter.active

    def execute(self, plan: StagePlan, cancel: threading.Event) -> Outcome:
        return _run(plan, cancel, self.starter)


class SpareExecutor(WarmForkExecutor):
    """Each stage is a spare process of ``starter`` when one fits, and
    started as a fresh process when none does (the warm executor's
    code with the other starter: the runner treats both alike)."""

    def __init__(self, starter: SpareStarter):
        super().__init__(starter)
