"""The Ray executor: each stage one Ray task, holding a whole GPU or CPU slot.

:class:`RayExecutor` satisfies :class:`~..executor.StageExecutor`. A stage's
task holds one whole GPU (``num_gpus=1``; a CPU slot on a cluster without
GPUs), is never retried (``max_retries=0``: a crashing candidate runs once)
and runs in a Ray worker process of its own (``max_calls=1``). Inside it the
stage runs as locally (:mod:`.task`); what it ended as is decided afterwards
by :mod:`..verdict`, as for every executor.

The driver watches the task too: a stage that has not ended ``grace`` plus
a margin after its time limit is cancelled with ``ray.cancel(force=True)``
and is ``timed out``; a newer save cancels the task (the stage is stopped
with its grace, then forcibly); a worker, node or task lost on the way is
``crashed`` with the reason. ``execute`` never raises for any of those.

A stage runs in place, pinned to this node, when the cluster has no other
node; otherwise the project travels as a ``working_dir`` package
(:mod:`.package`) and the stage runs in a copy of it wherever Ray puts it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..plan import StagePlan
from ..result import Outcome
from ..tamper import Tampered
from .cluster import RayCluster
from .package import PackageError, project_package
from .task import Finished, StageTask, Started, run_task

__all__ = ["RayExecutor"]

# Past a stage's limit and grace, how long the driver waits for its task to
# say how the stage ended before it cancels the task itself.
DRIVER_SLACK_S = 30.0
# After a cancel, how long the task may take beyond the stage's grace to end.
CANCEL_SLACK_S = 10.0
_MESSAGE_CHARS = 300
SHIP_ENV = "GEMSWATCH_RAY_SHIP"


class RayExecutor:
    """Runs each planned stage as one task on ``cluster``.

    Args:
        cluster: the session's cluster.
        ship: True sends the project with every task and runs it in a copy,
            False runs every stage in place on this node, None (default)
            ships only when the cluster has other nodes, or always when
            ``GEMSWATCH_RAY_SHIP=1`` (the way to other nodes, tried on one).
        poll_s: how often the driver looks at a running task.
    """

    warm = False  # each task is a fresh process: the warm pool stays out of Ray runs

    def __init__(self, cluster: RayCluster, *, ship: bool | None = None, poll_s: float = 0.1):
        self.cluster = cluster
        self.ship = True if ship is None and os.environ.get(SHIP_ENV) == "1" else ship
        self.poll_s = poll_s
        self._ray = cluster._ray
        self._remote = self._ray.remote(max_retries=0, max_calls=1)(run_task)

    def execute(self, plan: StagePlan, cancel: threading.Event) -> Outcome:
        start = time.monotonic()
        if cancel.is_set():
            return Outcome(None, 0.0, cancelled=True)
        shipped = self.ship if self.ship is not None else self.cluster.has_other_nodes()
        gpu = plan.device is not None
        try:
            task = StageTask(
                plan=plan,
                source=plan.snapshot.read_bytes() if plan.snapshot is not None else b"",
                shipped=shipped,
                # what gemswatch adds to its own environment: a shipped stage gets it over its node's
                overlay={k: v for k, v in plan.env.items() if os.environ.get(k) != v},
                gpu=gpu,
            )
            gen = self._remote.options(**self._placement(plan, shipped, gpu)).remote(task)
        except (OSError, PackageError) as e:
            return Outcome(None, time.monotonic() - start, spawn_error=str(e))
        except Exception as e:  # the cluster refused the task
            return Outcome(None, time.monotonic() - start, spawn_error=f"the Ray cluster refused the stage's task: {_line(e)}")
        return _Follow(self, gen, plan, cancel, start, shipped, gpu).run()

    def _placement(self, plan: StagePlan, shipped: bool, gpu: bool) -> dict[str, Any]:
        """Ray options: a whole GPU (or a CPU slot), and where the task may run."""
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": 1 if gpu else 0}
        if shipped:
            options["runtime_env"] = {"working_dir": project_package(plan.cwd)}
        else:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # The plan's files are on this node only.
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.cluster.driver_node, soft=False)
        return options


class _Follow:
    """The driver's side of one task: wait, enforce the limit, honour cancel."""

    def __init__(self, ex: RayExecutor, gen: Any, plan: StagePlan, cancel: threading.Event, start: float,
                 shipped: bool, gpu: bool):
        self.ex, self.ray, self.gen, self.plan, self.cancel = ex, ex._ray, gen, plan, cancel
        self.start, self.shipped, self.gpu = start, shipped, gpu
        self.started: Started | None = None

    def run(self) -> Outcome:
        plan = self.plan
        limit = None if plan.timeout is None else plan.timeout + plan.grace + DRIVER_SLACK_S
        since = time.monotonic()  # submitted, then started
        while True:
            if self.cancel.is_set():
                return self._cancelled()
            if limit is not None and time.monotonic() - since > limit:
                self._stop(force=True, wait=CANCEL_SLACK_S)
                if self.started is None:
                    slot = "GPU" if self.gpu else "CPU"
                    return self._lost(f"the Ray cluster did not start the stage within {limit:g} s (no free {slot} slot?)")
                return Outcome(None, self._took(), timed_out=True, timeout_s=plan.timeout, device=self._device())
            ready, _ = self.ray.wait([self.gen], timeout=self.ex.poll_s)
            if not ready:
                continue
            try:
                item = self.ray.get(next(self.gen))
            except StopIteration:
                return self._lost("the stage's Ray task ended without saying how the stage ended")
            except Exception as e:
                return self._failed(e)
            if isinstance(item, Started):
                self.started = item
                since = time.monotonic()  # the stage's limit counts from its start, as locally
            elif isinstance(item, Finished):
                return self._finished(item)

    def _took(self) -> float:
        return time.monotonic() - self.start

    def _device(self) -> str | None:
        """The GPU the stage held, with its node's address when it is not this one."""
        if not self.gpu or self.started is None:
            return None
        gpus = ",".join(self.started.gpus)
        return gpus if self.started.node == self.ex.cluster.driver_node else f"{self.started.ip}:{gpus}"

    def _finished(self, item: Finished) -> Outcome:
        plan = self.plan
        tampered: list[Tampered] = []
        if self.shipped:
            plan.log.parent.mkdir(parents=True, exist_ok=True)
            plan.log.write_bytes(item.log or b"")
            if item.report is not None:
                plan.report.write_bytes(item.report)
            for rel, data in item.tampered:
                kept_at = None
                if data is not None:
                    kept_at = plan.log.parent / "tampered" / rel
                    kept_at.parent.mkdir(parents=True, exist_ok=True)
                    kept_at.write_bytes(data)
                tampered.append(Tampered(Path(plan.cwd) / rel, kept_at))
        return replace(item.outcome, device=self._device(), tampered=tuple(tampered))

    def _cancelled(self) -> Outcome:
        """A newer save: the task stops its stage with the stage's grace; past
        that (and a margin) it is killed."""
        if not self._stop(force=False, wait=self.plan.grace + CANCEL_SLACK_S):
            self._stop(force=True, wait=CANCEL_SLACK_S)
        return Outcome(None, self._took(), cancelled=True, device=self._device())

    def _stop(self, *, force: bool, wait: float) -> bool:
        """Cancel the task; True when it ended within ``wait`` seconds."""
        try:
            self.ray.cancel(self.gen, force=force)
        except Exception:  # it ended meanwhile
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            ready, _ = self.ray.wait([self.gen], timeout=min(self.ex.poll_s, max(0.0, deadline - time.monotonic())))
            if not ready:
                continue
            try:
                self.ray.get(next(self.gen))
            except StopIteration:
                return True
            except Exception:  # cancelled, or the worker is gone: it ended
                return True
        return False

    def _failed(self, e: Exception) -> Outcome:
        from ray import exceptions as rex

        if isinstance(e, rex.TaskCancelledError):
            return self._lost("the stage's Ray task was cancelled on the cluster, not by gemswatch")
        if isinstance(e, rex.RuntimeEnvSetupError):
            return Outcome(None, self._took(), spawn_error=f"the Ray cluster could not set up the stage's files: {_line(e)}")
        if isinstance(e, rex.NodeDiedError):
            return self._lost(f"the node that ran the stage died or left the Ray cluster: {_line(e)}")
        if isinstance(e, rex.WorkerCrashedError):
            return self._lost(f"the Ray worker that ran the stage died (killed, out of memory, or its node stopped): {_line(e)}")
        if isinstance(e, rex.RayTaskError):
            cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else e
            return self._lost(f"gemswatch's stage task failed on its node: {type(cause).__name__}: {_line(cause)}")
        return self._lost(f"the Ray cluster lost the stage: {type(e).__name__}: {_line(e)}")

    def _lost(self, reason: str) -> Outcome:
        """``crashed`` with ``reason``; the reason ends the stage's log too."""
        try:
            self.plan.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.plan.log, "ab") as log:
                log.write(f"\ngemswatch: {reason}\n".encode())
        except OSError:
            pass
        return Outcome(None, self._took(), lost=reason, device=self._device())


def _line(e: BaseException) -> str:
    """The first non-empty line of an error, shortened."""
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."
