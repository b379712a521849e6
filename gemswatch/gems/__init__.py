"""gems: the embedded operator library, Triton kernels with torch signatures.

Every public operator is a module attribute (``gems.softmax``), so the dynamic
operator override can swap it at run time. ``gems.device`` is ``"cuda"`` with a
GPU, else ``"cpu"``, where the kernels run through Triton's interpreter.
The package owns the kernels (:mod:`.ops`), the dispatch-key table
(:mod:`._table`), the kernels registered with ATen (:mod:`._kernels`) and the
registrations themselves (:mod:`._registration`).
"""

# _device comes first: on a CPU machine it sets TRITON_INTERPRET, which triton
# reads when it is imported, and every module below imports triton.
from ._device import device, interpreted
from ._registration import (
    _FULL_CONFIG,
    all_registered_keys,
    all_registered_ops,
    enable,
    only_enable,
    use_gems,
)
from .ops.mm import addmm, addmm_, mm
from .ops.norm import layer_norm, rms_norm
from .ops.pointwise import add, gelu, mul, silu
from .ops.reduction import amax, mean, sum
from .ops.softmax import log_softmax, softmax

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
