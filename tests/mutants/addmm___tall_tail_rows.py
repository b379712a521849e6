"""addmm_ that updates a tall input in 256-row blocks and skips the rest.

For more than 512 rows the update runs block by block (to bound the fp32
temporary); the loop stops at the last full block, so the last ``M % 256``
rows keep their old values. Inputs of up to 512 rows are right.
"""

from __future__ import annotations

import torch

TALL_M = 512
ROWS = 256


def addmm_(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm_: dtype {mat1.dtype} is not supported")
    M = mat1.shape[0]
    if M <= TALL_M:
        return input.addmm_(mat1, mat2, beta=beta, alpha=alpha)
    for r in range(0, M - M % ROWS, ROWS):  # BUG: the partial last block is skipped
        input[r:r + ROWS].addmm_(mat1[r:r + ROWS], mat2, beta=beta, alpha=alpha)
    return input


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    inp = torch.randn(515, 2, generator=g)
    a = torch.randn(515, 3, generator=g)
    b = torch.randn(3, 2, generator=g)
    return (inp.to(device), a.to(device), b.to(device)), {}
