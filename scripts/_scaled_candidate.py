"""Torch-backed candidates for scripts/scale_error_sweep.py.

``scaled(op, axis, lo, hi, factor)`` returns a function with ``op``'s
signature that computes the operator honestly and multiplies the result by
``factor`` only when the input's relevant size (``axis``) lies in
``[lo, hi]``. torch's own op runs first, on the inputs as given, so the
result has torch's dtype, shape, layout and errors; a real floating result
is then overwritten with the float64 reference (tests/mutants/_references.py,
copied next to this module) times the factor, rounded once to the result's
dtype. Integer, bool and complex results stay torch's: a 0.2 % scale cannot
show in integers, and the sweep is about real floating results.

Sizes (``axis``), as the suites record them:

- ``elements``: the result's element count (pointwise ops);
- ``width``: the reduced width (sum, mean, amax: the product of the reduced
  dims; softmax, log_softmax: the length of ``dim``; rms_norm, layer_norm:
  the product of ``normalized_shape``);
- ``M``, ``N``, ``K``: one dimension of the product (mm, addmm, addmm_).

This module is copied into the sweep's candidate folder, which gemswatch
appends to ``sys.path`` when a candidate loads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from _references import REFERENCES

__all__ = ["scaled", "AXES"]

AXES = {
    "add": ("elements",), "mul": ("elements",), "gelu": ("elements",), "silu": ("elements",),
    "sum": ("width",), "mean": ("width",), "amax": ("width",),
    "softmax": ("width",), "log_softmax": ("width",), "rms_norm": ("width",), "layer_norm": ("width",),
    "mm": ("M", "N", "K"), "addmm": ("M", "N", "K"), "addmm_": ("M", "N", "K"),
}

# op -> torch's own op with the same signature.
_TORCH: dict[str, Callable[..., torch.Tensor]] = {
    "add": torch.add, "mul": torch.mul, "gelu": F.gelu, "silu": F.silu,
    "sum": torch.sum, "mean": torch.mean, "amax": torch.amax,
    "softmax": torch.softmax, "log_softmax": torch.log_softmax,
    "rms_norm": F.rms_norm, "layer_norm": F.layer_norm,
    "mm": torch.mm, "addmm": torch.addmm, "addmm_": torch.Tensor.addmm_,
}


def _reduced_width(x: torch.Tensor, dim: int | Sequence[int] | None) -> int:
    if x.dim() == 0:
        return 1
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return x.numel()
    dims = [dim] if isinstance(dim, int) else list(dim)
    return math.prod(x.shape[d] for d in dims)


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: object) -> object:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _size(op: str, axis: str, out: torch.Tensor, args: tuple, kwargs: dict) -> int:
    """The input's size along ``axis`` (see the module docstring)."""
    if axis == "elements":
        return out.numel()
    x = args[0]
    if op in ("sum", "mean"):
        return _reduced_width(x, _arg(args, kwargs, 1, "dim", None))
    if op == "amax":
        return _reduced_width(x, _arg(args, kwargs, 1, "dim", ()))
    if op in ("softmax", "log_softmax"):
        return 1 if x.dim() == 0 else x.shape[_arg(args, kwargs, 1, "dim", -1)]
    if op in ("rms_norm", "layer_norm"):
        shape = _arg(args, kwargs, 1, "normalized_shape", ())
        return math.prod([shape] if isinstance(shape, int) else shape)
    a, b = (args[0], args[1]) if op == "mm" else (args[1], args[2])
    return {"M": a.shape[0], "K": a.shape[1], "N": b.shape[1]}[axis]


def scaled(op: str, axis: str, lo: int, hi: int, factor: float, dtype: str | None = None) -> Callable[..., torch.Tensor]:
    """``op`` computed honestly, times ``factor`` where its ``axis`` size is
    in ``[lo, hi]`` (``factor=1.0``: the honest control) and, when ``dtype``
    is given (e.g. ``"bfloat16"``), only for results of that dtype."""
    if axis not in AXES[op]:
        raise ValueError(f"scaled: {op} has no axis {axis!r} ({', '.join(AXES[op])})")
    reference, torch_op = REFERENCES[op], _TORCH[op]

    def candidate(*args, **kwargs):
        # The reference first: an in-place op changes its input.
        want = reference(*args, **kwargs)
        out = torch_op(*args, **kwargs)
        if not (out.dtype.is_floating_point and out.numel()):
            return out
        if lo <= _size(op, axis, out, args, kwargs) <= hi and dtype in (None, str(out.dtype).removeprefix("torch.")):
            want = want * factor
        return out.copy_(want.to(out.device))

    candidate.__name__ = candidate.__qualname__ = op
    return candidate
