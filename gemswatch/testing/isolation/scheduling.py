"""The judge's own CPU scheduling, out of the candidate's reach.

A process may change the scheduling of another of its user's processes
(its CPUs, its policy, its nice value), and the sandbox does not stop the
system calls that do it. A candidate that moved the judge to one busy
core, or to the idle policy, would slow the baselines the judge times,
and its ratios would grow with no faster kernel. So the judge takes note
of its scheduling before the candidate's worker starts
(:func:`scheduling_now`) and, each time it is about to time a baseline or
measure the device, finds it as it was (:func:`check_scheduling`).

Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from ..integrity import IntegrityError

__all__ = ["Scheduling", "check_scheduling", "scheduling_now"]


@dataclass(frozen=True)
class Scheduling:
    """What decides how this process's main thread gets the CPU."""

    cpus: frozenset[int]
    policy: int
    priority: int
    nice: int


def scheduling_now() -> Scheduling:
    return Scheduling(frozenset(os.sched_getaffinity(0)), os.sched_getscheduler(0), os.sched_getparam(0).sched_priority,
                      os.getpriority(os.PRIO_PROCESS, 0))


def check_scheduling(before: Scheduling) -> None:
    """IntegrityError('judge-scheduling') naming what changed since ``before``."""
    now = scheduling_now()
    if now == before:
        return
    changed = [f"{f.name} {_shown(getattr(before, f.name))} -> {_shown(getattr(now, f.name))}"
               for f in fields(Scheduling) if getattr(now, f.name) != getattr(before, f.name)]
    raise IntegrityError(
        "judge-scheduling",
        f"the judge's CPU scheduling changed while the candidate ran ({'; '.join(changed)}); "
        "a candidate may not change another process's scheduling",
    )


def _shown(value: object) -> str:
    return str(sorted(value)) if isinstance(value, frozenset) else str(value)
