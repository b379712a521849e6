"""mm that, for K > 2048, sums K chunks of 64 (one K tile) in the inputs' dtype.

Each chunk's product is accumulated in fp32 by torch, but the running sum
of the chunks is kept in fp16/bf16: with many chunks of one sign the sum
outgrows the chunks and each addition loses their low bits. float32 inputs
and K <= 2048 are right.
"""

from __future__ import annotations

import torch

DEEP_K = 2048
CHUNK = 64


def mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"mm: dtype {input.dtype} is not supported")
    K = input.shape[1]
    if K <= DEEP_K:
        return torch.mm(input, mat2)
    out = torch.zeros((input.shape[0], mat2.shape[1]), dtype=input.dtype, device=input.device)
    for k0 in range(0, K, CHUNK):  # BUG: the running sum rounds to the input dtype after every chunk
        out += torch.mm(input[:, k0:k0 + CHUNK], mat2[k0:k0 + CHUNK])
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    a = torch.rand(16, 8192, generator=g)  # one sign: the sum grows to ~2000
    b = torch.rand(8192, 16, generator=g)
    return (a.to(device, torch.float16), b.to(device, torch.float16)), {}
