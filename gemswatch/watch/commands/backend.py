"""Where a command's stages run: this machine (the default) or a Ray cluster.

``--executor`` wins over config.yaml's ``executor:`` and ``--ray-address``
over ``ray_address:``. The local backend is this machine's devices and the
session's own warm pool; the Ray backend is a cluster started for the
session (or joined at the address) with a :class:`RayExecutor`, whose
stages start cold and each hold a whole GPU or CPU slot.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from ..config import Config
from ..devices import DeviceInfo, detect_devices
from ..stage import StageExecutor
from .output import print_error

__all__ = ["Backend", "open_backend"]


@dataclass(frozen=True)
class Backend:
    """The devices the scheduler sees, the executor (None: the local
    default with its warm pool), and what to call once the stages are stopped."""

    device: DeviceInfo
    executor: StageExecutor | None = None
    close: Callable[[], None] | None = None


def open_backend(args: argparse.Namespace, cfg: Config) -> Backend | int:
    """The backend the command line and ``cfg`` choose, or exit code 2 with
    one line on stderr (Ray missing, the cluster unreachable)."""
    kind = getattr(args, "executor", None) or cfg.executor
    address = getattr(args, "ray_address", None) or cfg.ray_address
    if kind != "ray":
        if getattr(args, "ray_address", None):
            print_error("gemswatch: --ray-address is for --executor ray; add --executor ray (or leave the address out)")
            return 2
        return Backend(detect_devices())
    from ..stage.ray import RayCluster, RayExecutor, RayUnavailable

    try:
        cluster = RayCluster(address)
    except RayUnavailable as e:
        chosen = "--executor ray" if getattr(args, "executor", None) else f"executor: ray in {cfg.path.name}"
        print_error(f"gemswatch: {chosen}: {e}")
        return 2
    return Backend(cluster.device_info(), RayExecutor(cluster), cluster.close)
