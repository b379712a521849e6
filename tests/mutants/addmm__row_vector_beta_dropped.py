"""addmm whose GEMV path (a single output row) forgets beta.

With M == 1 and N > 1 the product is a vector-matrix product, done by a
separate kernel whose epilogue adds the (broadcast) input unscaled:
``input + alpha * (mat1 @ mat2)``. beta == 1 is right there, and so is
every product of more than one row (and 1x1 outputs).
"""

from __future__ import annotations

import torch


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    M, N = mat1.shape[0], mat2.shape[1]
    if M == 1 and N > 1 and beta != 0:
        prod = torch.mm(mat1.float(), mat2.float())
        return (input.expand(M, N).float() + alpha * prod).to(mat1.dtype)  # BUG: beta not applied
    return torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(37, generator=g).to(device), torch.randn(1, 200, generator=g).to(device),
            torch.randn(200, 37, generator=g).to(device)), {"beta": 0.5, "alpha": 2.0}
