"""sum that keeps the running sum of long 16-bit rows in the input dtype.

Rows longer than 4096 are summed in chunks of 1024, each chunk in float32,
but the total is carried in float16/bfloat16 between chunks: partial sums
beyond 65504 overflow float16, and a long one-signed row loses the chunks'
low bits. Short rows and float32 are right.
"""

from __future__ import annotations

import torch

LONG = 4096
CHUNK = 1024


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if input.dtype not in (torch.float16, torch.bfloat16) or dtype is not None or input.dim() == 0:
        return torch.sum(input, dim, keepdim, dtype=dtype)
    dims = list(range(input.dim())) if dim is None or dim == () or dim == [] else [dim] if isinstance(dim, int) else list(dim)
    if len(dims) != 1 or input.shape[dims[0]] <= LONG:
        return torch.sum(input, dim, keepdim, dtype=dtype)
    d = dims[0]
    total = torch.zeros_like(input.narrow(d, 0, 1))
    for start in range(0, input.shape[d], CHUNK):
        chunk = input.narrow(d, start, min(CHUNK, input.shape[d] - start))
        total += chunk.sum(d, keepdim=True, dtype=torch.float32).to(input.dtype)  # BUG: a 16-bit running sum
    return total if keepdim else total.squeeze(d)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    n = 20000
    row = torch.cat([torch.full((n // 2,), 3000.0), torch.full((n // 2,), -3000.0)]) + torch.rand(n, generator=g)
    return (row.view(1, n).to(device, torch.float16), 1), {}
