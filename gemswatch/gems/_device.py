"""Pick the device the gems kernels run on.

Must run before triton is imported: Triton reads ``TRITON_INTERPRET`` when its
own standard library is decorated, so setting it later has no effect.
``gemswatch.gems`` imports this module before anything else, and every
``gemswatch.gems.ops`` module is imported after its package, so the ops
modules import triton at their top like any module.
"""

from __future__ import annotations

import os

__all__ = ["device", "interpreted"]


def _has_gpu() -> bool:
    forced = os.environ.get("GEMSWATCH_DEVICE")
    if forced:
        return forced == "cuda"
    import torch

    # is_available() does not create a CUDA context, so a process that
    # imported us can still fork clean children.
    return torch.cuda.is_available()


device: str = "cuda" if _has_gpu() else "cpu"
interpreted: bool = device == "cpu"

if interpreted:
    os.environ["TRITON_INTERPRET"] = "1"
