"""The Ray cluster a session runs its stages on: started here or joined.

With no address, a cluster of this machine is started for the session
(its cores as CPU slots, its CUDA devices as GPU slots) and shut down with
it, even when gemswatch is killed (:mod:`.watchdog`). With an address (``auto`` or ``HOST:PORT``) the session joins a
running cluster as one more driver; this machine must be one of its nodes
(``ray start --address=...``), as Ray requires of a driver.

Ray is imported here, lazily: gemswatch without Ray never imports it.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass

from ...devices import DeviceInfo, detect_devices
from .watchdog import MARKER_ENV, Watchdog

__all__ = ["INSTALL_HINT", "ClusterShape", "RayCluster", "RayUnavailable", "import_ray"]

INSTALL_HINT = 'pip install "gemswatch[ray]"'
# How long the list of nodes is trusted before it is asked for again.
_NODES_TTL_S = 5.0
# How long a cluster's address may take to accept a connection.
_CONNECT_TIMEOUT_S = 10.0


def _answers(address: str, timeout: float = _CONNECT_TIMEOUT_S) -> None:
    """Fail at once when nothing listens at HOST:PORT: Ray itself would wait
    for that address for minutes, deaf to SIGTERM."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # `auto` and the like: Ray finds the address, and fails fast without one
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(f"nothing answers at {address} ({e.strerror or e})") from e


def _quiet_worker_deaths() -> None:
    """Keep the raylet's notes (a worker that died, with advice) off stdout,
    where they would break the --json stream and the dashboard: the stage
    they concern is ``crashed`` with the reason already."""
    try:
        from ray._private import worker as driver
    except ImportError:  # pragma: no cover - another Ray layout: the notes print
        return
    shown = driver.print_to_stdstream
    if getattr(shown, "gemswatch_quiet", False):
        return

    def quiet(data, ignore_prefix: bool):
        if data.get("pid") == "raylet":
            logging.getLogger("ray").debug("raylet: %s", " ".join(data.get("lines") or []))
            return
        shown(data, ignore_prefix)

    quiet.gemswatch_quiet = True  # type: ignore[attr-defined]
    driver.print_to_stdstream = quiet


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached: one line that says what to do."""


def import_ray():
    """The ``ray`` module, or :class:`RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(f"the ray executor needs Ray, which is not installed: {INSTALL_HINT}") from e
    return ray


@dataclass(frozen=True)
class ClusterShape:
    """What the cluster offers: whole GPUs and CPU slots on its alive nodes."""

    nodes: int
    gpus: int
    cpus: int


class RayCluster:
    """One session's connection to a Ray cluster.

    Args:
        address: ``auto``, ``HOST:PORT``, or None to start a cluster of this
            machine (unless ``RAY_ADDRESS`` names one to join).
        cpus / gpus: the slots of a cluster started here (default: this machine's
            cores and CUDA devices; fake GPUs are fine, Ray only counts them).

    Raises:
        RayUnavailable: Ray is missing, or the cluster cannot be joined.
    """

    def __init__(self, address: str | None = None, *, cpus: int | None = None, gpus: int | None = None):
        ray = import_ray()
        self._ray = ray
        # Ray's own variable names a cluster to join as the option does.
        self.address = address = address or os.environ.get("RAY_ADDRESS") or None
        # A process that already joined a cluster (a test's) keeps it: not ours to shut down.
        self.joined_before = ray.is_initialized()
        self.started_here = False
        self._watchdog: Watchdog | None = None
        if not self.joined_before:
            options = dict(
                include_dashboard=False,
                log_to_driver=False,  # stage output goes to its log file, never to the terminal
                logging_level=logging.ERROR,
            )
            try:
                if address is None:
                    # Marked before it starts, so that a SIGKILLed gemswatch takes all of it along.
                    self._watchdog = Watchdog(f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
                    os.environ[MARKER_ENV] = self._watchdog.entry.split("=", 1)[1]
                    devices = detect_devices()
                    ray.init(
                        num_cpus=cpus if cpus is not None else max(1, os.cpu_count() or 1),
                        num_gpus=gpus if gpus is not None else (len(devices.gpus) if devices.kind == "cuda" else 0),
                        **options,
                    )
                    self.started_here = True
                else:
                    options.pop("include_dashboard")
                    _answers(address)
                    # The driver's C++ side would print each retry of a slow cluster on stderr.
                    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
                    ray.init(address=address, **options)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError, OSError) as e:
                self._close_watchdog()
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                hint = " (start one with `ray start --head`, or leave out --ray-address)" if address else ""
                raise RayUnavailable(f"cannot start or join {where}: {first}{hint}") from e
        _quiet_worker_deaths()
        self.driver_node = ray.get_runtime_context().get_node_id()
        self._nodes_seen: tuple[float, list[dict]] | None = None

    def _alive_nodes(self) -> list[dict]:
        import time

        now = time.monotonic()
        if self._nodes_seen is None or now - self._nodes_seen[0] > _NODES_TTL_S:
            self._nodes_seen = (now, [n for n in self._ray.nodes() if n.get("Alive")])
        return self._nodes_seen[1]

    def shape(self) -> ClusterShape:
        """The whole GPUs and CPU slots of the alive nodes, now."""
        nodes = self._alive_nodes()
        gpus = sum(int(n.get("Resources", {}).get("GPU", 0)) for n in nodes)
        cpus = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes)
        return ClusterShape(len(nodes), gpus, cpus)

    def has_other_nodes(self) -> bool:
        """Whether a stage could land on a node other than this one (then the project travels)."""
        return any(n.get("NodeID") != self.driver_node for n in self._alive_nodes())

    def device_info(self) -> DeviceInfo:
        """The scheduler's slots: one per GPU of the cluster, each held whole by
        one stage; on a cluster without GPUs, its CPU slots."""
        shape = self.shape()
        where = "started here" if self.started_here else f"at {self.address}" if self.address else "joined"
        label = f"ray cluster {where}: {shape.nodes} node(s), {shape.gpus} GPU(s), {shape.cpus} CPU(s)"
        if shape.gpus:
            return DeviceInfo("cuda", tuple(f"ray:{i}" for i in range(shape.gpus)), exclusive=True, label=label)
        return DeviceInfo("cpu", cpus=max(1, shape.cpus), label=label)

    def close(self) -> None:
        """Leave the cluster; one started here is shut down (its tasks end with it)."""
        if not self.joined_before and self._ray.is_initialized():
            self._ray.shutdown()
        self._close_watchdog()

    def _close_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
            os.environ.pop(MARKER_ENV, None)
