"""addmm_ that, with beta == 0, copies the plain product into the input.

The input is rightly not read when beta == 0, but alpha is forgotten on
that shortcut: the input receives ``mat1 @ mat2``. Right for beta != 0 and
for beta == 0 with alpha == 1.
"""

from __future__ import annotations

import torch


def addmm_(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm_: dtype {mat1.dtype} is not supported")
    if beta == 0:
        return input.copy_(torch.mm(mat1, mat2))  # BUG: alpha dropped
    return input.addmm_(mat1, mat2, beta=beta, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    inp = torch.randn(4, 3, generator=g)
    a = torch.randn(4, 5, generator=g)
    b = torch.randn(5, 3, generator=g)
    return (inp.to(device), a.to(device), b.to(device)), {"beta": 0, "alpha": -1.5}
