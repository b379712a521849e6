"""float64 references of the operators, to confirm each mutant wrong on its witness.

``REFERENCES[op](*args, **kwargs)`` takes what a mutant's ``witness()``
returns and gives the float64 CPU result the operator must produce; for an
in-place operator, what its first argument must hold afterwards. The
inputs are left as they are.
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


REFERENCES: dict[str, Callable[..., torch.Tensor]] = {
    "mm": _mm,
    "addmm": _addmm,
    "addmm_": _addmm,
}
