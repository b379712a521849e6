"""addmm that takes beta == 0 as a plain matrix product and forgets alpha.

With beta == 0 the input is not read (as torch does), but the shortcut
returns ``mat1 @ mat2`` instead of ``alpha * (mat1 @ mat2)``. Right for
beta != 0, and for beta == 0 with alpha == 1.
"""

from __future__ import annotations

import torch


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm: dtype {mat1.dtype} is not supported")
    if beta == 0:
        return torch.mm(mat1, mat2)  # BUG: alpha dropped
    return torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    bias = torch.randn(3, generator=g)
    a = torch.randn(4, 5, generator=g)
    b = torch.randn(5, 3, generator=g)
    return (bias.to(device), a.to(device), b.to(device)), {"beta": 0, "alpha": 2.0}
