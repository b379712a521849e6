"""mm whose split-K path for large products drops the K remainder.

Products of at least 2^24 multiply-adds are split along K into 4 slices of
``K // 4`` columns, each slice's partial product summed into the output;
the last ``K % 4`` columns of A (rows of B) belong to no slice. Smaller
products, and large ones whose K is a multiple of 4, are right.
"""

from __future__ import annotations

import torch

LARGE = 1 << 24
SPLITS = 4


def mm(input, mat2):
    M, K = input.shape
    N = mat2.shape[1]
    if M * N * K < LARGE or input.dtype == torch.float64:
        return torch.mm(input, mat2)
    per = K // SPLITS
    acc = torch.zeros(M, N, dtype=torch.float32, device=input.device)
    for s in range(SPLITS):  # BUG: range(SPLITS) slices of K // SPLITS leave K % SPLITS columns out
        acc += input[:, s * per:(s + 1) * per].float() @ mat2[s * per:(s + 1) * per].float()
    return acc.to(input.dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(256, 257, generator=g).to(device), torch.randn(257, 256, generator=g).to(device)), {}
