"""gems: the embedded operator library, Triton kernels with torch signatures.

Every public operator is a module attribute (``gems.softmax``), so the dynamic
operator override can swap it at run time. ``gems.device`` is ``"cuda"`` with a
GPU, else ``"cpu"``, where the kernels run through Triton's interpreter.
"""

from ._device import device, interpreted  # noqa: I001  (must precede triton)
from .ops.pointwise import add, gelu, mul, silu
from .ops.reduction import amax, mean, sum
from .ops.softmax import log_softmax, softmax
from .ops.norm import layer_norm, rms_norm
from .ops.mm import addmm, addmm_, mm
from ._registration import (
    _FULL_CONFIG,
    all_registered_keys,
    all_registered_ops,
    enable,
    only_enable,
    use_gems,
)

__all__ = [
    "device",
    "interpreted",
    "add",
    "mul",
    "gelu",
    "silu",
    "sum",
    "mean",
    "amax",
    "softmax",
    "log_softmax",
    "rms_norm",
    "layer_norm",
    "mm",
    "addmm",
    "addmm_",
    "enable",
    "only_enable",
    "use_gems",
    "all_registered_ops",
    "all_registered_keys",
]
