"""Which device the stages run on, found without importing torch."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["DeviceInfo", "detect_devices"]


@dataclass(frozen=True)
class DeviceInfo:
    """Where stages run: this machine's CPU or GPUs, or a cluster's slots.

    ``cpus``: CPU slots when they are not this machine's cores (a cluster);
    ``exclusive``: every stage holds its device slot alone (a Ray GPU slot),
    not only the benchmark; ``label``: how to describe it, when not
    by ``kind``."""

    kind: str  # "cpu" or "cuda"
    gpus: tuple[str, ...] = ()
    cpus: int | None = None
    exclusive: bool = False
    label: str = ""

    @property
    def slots(self) -> list[str | None]:
        """Device slots for the scheduler: one per GPU, or one CPU slot."""
        return list(self.gpus) if self.kind == "cuda" else [None]

    def default_jobs(self) -> int:
        if self.kind == "cuda":
            return len(self.gpus)
        return max(1, self.cpus if self.cpus is not None else os.cpu_count() or 1)

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.kind == "cuda":
            return f"cuda x{len(self.gpus)} ({','.join(self.gpus)})"
        return "cpu (Triton interpreter)"


def detect_devices(env: dict[str, str] | None = None) -> DeviceInfo:
    """GPUs visible to the stages: ``GEMSWATCH_DEVICE`` and ``CUDA_VISIBLE_DEVICES``
    are honoured; otherwise ``nvidia-smi`` is asked. No GPU means the CPU."""
    env = dict(os.environ if env is None else env)
    forced = env.get("GEMSWATCH_DEVICE")
    if forced and forced != "cuda":
        return DeviceInfo("cpu")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return DeviceInfo("cuda", tuple(ids)) if ids else DeviceInfo("cpu")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            ids = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().isdigit()]
            if out.returncode == 0 and ids:
                return DeviceInfo("cuda", tuple(ids))
        except (OSError, subprocess.SubprocessError):
            pass
    return DeviceInfo("cpu")
