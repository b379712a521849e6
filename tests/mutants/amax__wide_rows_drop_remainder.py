"""amax whose wide-row path drops the last partial chunk.

Rows wider than 65536 are reduced in chunks of 4096 columns,
``width // 4096`` of them: the last ``width % 4096`` columns are never
read, and a maximum there is missed. Narrower rows are right.
"""

from __future__ import annotations

import torch

WIDE = 1 << 16
CHUNK = 4096


def amax(input, dim=(), keepdim=False):
    last = isinstance(dim, int) and input.dim() >= 1 and dim % input.dim() == input.dim() - 1
    if not last or input.shape[-1] <= WIDE:
        return torch.amax(input, dim, keepdim)
    n = input.shape[-1]
    chunks = [input[..., s:s + CHUNK].amax(-1, keepdim=True) for s in range(0, (n // CHUNK) * CHUNK, CHUNK)]  # BUG: no remainder chunk
    out = torch.cat(chunks, -1).amax(-1, keepdim=keepdim)
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, WIDE + 3001, generator=g)
    x[0, -1] = 10.0
    return (x.to(device), -1), {}
