"""addmm_ that reads the input even when beta == 0.

``beta * input`` is computed whatever beta is, and 0 * NaN and 0 * inf are
NaN, where torch ignores the input entirely when beta == 0. Right for
finite inputs and for any beta != 0.
"""

from __future__ import annotations

import torch


def addmm_(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm_: dtype {mat1.dtype} is not supported")
    result = alpha * torch.mm(mat1.float(), mat2.float()) + beta * input.float()  # BUG: 0 * NaN is NaN
    return input.copy_(result)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    inp = torch.randn(4, 3, generator=g)
    inp[1, 2] = float("nan")
    inp[3, 0] = float("inf")
    a = torch.randn(4, 5, generator=g)
    b = torch.randn(5, 3, generator=g)
    return (inp.to(device), a.to(device), b.to(device)), {"beta": 0}
