"""amax whose split wide-row path stores its partial maxima transposed.

Rows wider than 8192 are split into 8192-wide chunks on a (row, chunk)
grid; each program stores its partial maximum at ``chunk * n_rows + row``
but the combining pass reads them at ``row * n_chunks + chunk``. With one
row (or one chunk) the two agree; with several rows of more than 8192
elements each row gets other rows' partials.
"""

from __future__ import annotations

import builtins

import torch

CHUNK = 8192


def _lowest(dtype):
    return -torch.inf if dtype.is_floating_point else (torch.iinfo(dtype).min if dtype != torch.bool else False)


def amax(input, dim=(), keepdim=False):
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd = builtins.max(input.dim(), 1)
    red = sorted({d % nd for d in dims}) if dims else list(range(input.dim()))
    if input.dim() == 0 or len(red) != (len(dims) if dims else input.dim()) or input.numel() == 0:
        return torch.amax(input, dim, keepdim)
    kept = [d for d in range(input.dim()) if d not in red]
    y = input.permute(*kept, *red).reshape(-1, builtins.max(1, int(torch.tensor([input.shape[d] for d in red]).prod())))
    rows, n = y.shape
    if n <= CHUNK:
        return torch.amax(input, dim, keepdim)
    chunks = -(-n // CHUNK)
    y = torch.cat([y, torch.full((rows, chunks * CHUNK - n), _lowest(y.dtype), dtype=y.dtype, device=y.device)], 1)
    partial = y.view(rows, chunks, CHUNK).amax(-1)  # partial[row, chunk]
    stored = partial.t().contiguous().view(-1)  # written at chunk * rows + row
    out = stored.view(rows, chunks).amax(-1)  # BUG: read at row * chunks + chunk
    out = out.reshape([input.shape[d] for d in kept])
    if keepdim:
        out = out.reshape([1 if d in red else input.shape[d] for d in range(input.dim())])
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 10000, generator=g)
    x[0] += 10.0  # rows of different levels
    x[2] -= 10.0
    return (x.to(device), -1), {}
