"""addmm that scales a non-contiguous full bias by beta twice.

A full (M, N) bias that is not contiguous (a transposed or sliced view) is
copied as ``(beta * input).contiguous()`` before the product, and the
epilogue multiplies it by beta again: the bias term comes out as
``beta**2 * input``. Right when beta is 0 or 1, and for contiguous or
broadcast biases.
"""

from __future__ import annotations

import torch


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm: dtype {mat1.dtype} is not supported")
    M, N = mat1.shape[0], mat2.shape[1]
    product = torch.mm(mat1.float(), mat2.float())
    if beta == 0:
        return (alpha * product).to(mat1.dtype)
    bias = input
    if input.shape == (M, N) and not input.is_contiguous():
        bias = (beta * input).contiguous()  # a dense copy, pre-scaled ...
    return (alpha * product + beta * bias.float()).to(mat1.dtype)  # BUG: ... and scaled again


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    bias = torch.randn(6, 7, generator=g).t()  # (7, 6), column-major
    a = torch.randn(7, 4, generator=g)
    b = torch.randn(4, 6, generator=g)
    return (bias.to(device), a.to(device), b.to(device)), {"beta": 0.5}
