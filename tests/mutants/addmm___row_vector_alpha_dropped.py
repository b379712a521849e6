"""addmm_ whose GEMV path (a single output row) forgets alpha.

With M == 1 and N > 1 the in-place update goes through a vector-matrix
kernel whose epilogue computes ``beta * input + mat1 @ mat2``: alpha is not
applied. alpha == 1 is right there, and so is every product of more than
one row (and 1x1 outputs).
"""

from __future__ import annotations

import torch


def addmm_(input, mat1, mat2, *, beta=1, alpha=1):
    M, N = mat1.shape[0], mat2.shape[1]
    if M == 1 and N > 1 and tuple(input.shape) == (M, N):
        prod = torch.mm(mat1.float(), mat2.float())
        new = prod if beta == 0 else beta * input.float() + prod  # BUG: alpha not applied
        input.copy_(new)
        return input
    # out of place first: the input may share memory with the matrices
    return input.copy_(torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha))


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 37, generator=g).to(device), torch.randn(1, 200, generator=g).to(device),
            torch.randn(200, 37, generator=g).to(device)), {"beta": 0.5, "alpha": -1.5}
