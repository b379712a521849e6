"""amax that restores a permuted input's dims with the permutation itself.

A dense non-contiguous input is reduced in its memory order (a permute
that makes it contiguous), and the kept dims are put back with that same
permutation instead of its inverse. Right for contiguous inputs and for
transposes (a swap is its own inverse); a 4-dim view permuted by
(2, 0, 3, 1) reduced over one dim comes back with its dims shuffled.
"""

from __future__ import annotations

import torch


def amax(input, dim=(), keepdim=False):
    if input.dim() < 3 or input.is_contiguous() or not isinstance(dim, int):
        return torch.amax(input, dim, keepdim)
    order = sorted(range(input.dim()), key=lambda d: -input.stride(d))
    x = input.permute(order)
    if not x.is_contiguous():
        return torch.amax(input, dim, keepdim)
    d = dim % input.dim()
    reduced = torch.amax(x, order.index(d), keepdim=True)
    # BUG: permute(order) again, where the inverse permutation is needed
    result = reduced.permute(order).contiguous()
    return result if keepdim else result.squeeze(d)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 4, 5, 6, generator=g).to(device).permute(2, 0, 3, 1), 1), {}
