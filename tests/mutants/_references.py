"""float64 references of the operators, to confirm each mutant wrong on its witness.

``REFERENCES[op](*args, **kwargs)`` takes what a mutant's ``witness()``
returns and gives the float64 CPU result the operator must produce; for an
in-place operator, what its first argument must hold afterwards. Integer
results of add, mul and sum are computed exactly in their integer dtype
instead (float64 rounds int64 values past 2^53). The inputs are left as
they are.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gemswatch.testing.accuracy import to_reference

__all__ = ["REFERENCES"]


def _mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    return to_reference(input) @ to_reference(mat2)


def _addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    # As torch: beta == 0 ignores the input and alpha == 0 the product, NaN
    # and inf in them included.
    a, b = to_reference(mat1), to_reference(mat2)
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    if alpha != 0:
        out += alpha * (a @ b)
    if beta != 0:
        out += beta * to_reference(input)
    return out


def _ref(value):
    """A float64 CPU copy of a tensor argument; anything else as it is."""
    return to_reference(value) if isinstance(value, torch.Tensor) else value


def _cast_first(input: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    # torch casts the input to ``dtype=`` before computing.
    return to_reference(input.to(dtype) if dtype is not None else input)


def _integral(*values) -> bool:
    """Whether torch computes ``values`` in an integer (or bool) dtype."""
    dtype = torch.result_type(*values) if len(values) == 2 else values[0].dtype
    return not (dtype.is_floating_point or dtype.is_complex)


def _cpu(value):
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _add(input, other, *, alpha=1):
    if _integral(input, other):  # exact in the integer dtype: float64 rounds int64 past 2^53
        return torch.add(_cpu(input), _cpu(other), alpha=alpha)
    return _ref(input) + alpha * _ref(other) if alpha != 1 else _ref(input) + _ref(other)


def _mul(input, other):
    if _integral(input, other):
        return torch.mul(_cpu(input), _cpu(other))
    return _ref(input) * _ref(other)


def _gelu(input, approximate="none"):
    return torch.nn.functional.gelu(to_reference(input), approximate=approximate)


def _silu(input):
    return torch.nn.functional.silu(to_reference(input))


def _reduction(fn):
    def reference(input, dim=None, keepdim=False, *, dtype=None):
        if fn is torch.sum and dtype is None and _integral(input):
            # exact: torch sums integers in int64, which float64 rounds past 2^53
            x = input.detach().cpu()
            return fn(x) if dim is None else fn(x, dim, keepdim=keepdim)
        x = _cast_first(input, dtype)
        return fn(x) if dim is None else fn(x, dim, keepdim=keepdim)

    return reference


def _amax(input, dim=(), keepdim=False):
    return torch.amax(to_reference(input), dim, keepdim=keepdim)


def _softmax(input, dim=-1, dtype=None):
    return torch.softmax(_cast_first(input, dtype), dim)


def _log_softmax(input, dim=-1, dtype=None):
    return torch.log_softmax(_cast_first(input, dtype), dim)


def _rms_norm(input, normalized_shape, weight=None, eps=None):
    if eps is None:  # the eps of torch's compute type: float32 below float64
        eps = torch.finfo(torch.float64 if input.dtype == torch.float64 else torch.float32).eps
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return torch.nn.functional.rms_norm(to_reference(input), shape, _ref(weight), eps)


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return torch.nn.functional.layer_norm(to_reference(input), shape, _ref(weight), _ref(bias), eps)


REFERENCES: dict[str, Callable[..., torch.Tensor]] = {
    "add": _add,
    "mul": _mul,
    "gelu": _gelu,
    "silu": _silu,
    "sum": _reduction(torch.sum),
    "mean": _reduction(torch.mean),
    "amax": _amax,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "mm": _mm,
    "addmm": _addmm,
    "addmm_": _addmm,
}
