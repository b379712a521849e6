"""mean whose wide-row path rounds 1024-element partial sums to the input dtype before applying ``dtype=``.

With ``dtype=`` wider than a 16-bit input and more than 4096 reduced
elements, the split reduction sums each 1024-element chunk, stores the
partial in the input's dtype (float16 partials overflow past 65504, bfloat16
ones lose bits), and only then casts to ``dtype`` and finishes. Narrow rows,
and every reduction without ``dtype=``, are right.
"""

from __future__ import annotations

import builtins
import math

import torch

CHUNK = 1024
WIDE = 4096


def mean(input, dim=None, keepdim=False, *, dtype=None):
    nd = builtins.max(input.dim(), 1)
    all_dims = dim is None or (not isinstance(dim, int) and len(dim) == 0)
    red = list(range(input.dim())) if all_dims else sorted({d % nd for d in ([dim] if isinstance(dim, int) else dim)})
    n = math.prod(input.shape[d] for d in red) if input.dim() else 1
    if (dtype is not None and input.dtype in (torch.float16, torch.bfloat16) and dtype.itemsize > input.dtype.itemsize
            and n > WIDE and input.dim()):
        kept = [d for d in range(input.dim()) if d not in red]
        y = input.permute(*kept, *red).reshape(-1, n)
        pad = (-n) % CHUNK
        y = torch.cat([y, y.new_zeros(y.shape[0], pad)], 1).view(y.shape[0], -1, CHUNK)
        partial = y.sum(-1, dtype=torch.float32).to(input.dtype)  # BUG: partials stored in the input's dtype
        out = (partial.to(dtype).sum(-1) / n).reshape([input.shape[d] for d in kept])
        if keepdim:
            out = out.reshape([1 if d in red else input.shape[d] for d in range(input.dim())])
        return out
    if all_dims:
        return torch.mean(input, dtype=dtype) if not keepdim else torch.mean(input, tuple(range(input.dim())), True, dtype=dtype)
    return torch.mean(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(2, 5000, generator=g, dtype=torch.float64) * 60000).to(device, torch.float16)
    return (x, -1), {"dtype": torch.float32}
