"""sum whose kernel for rows wider than 65536 drops the last partial tile.

Wide rows are split over programs in tiles of 4096 columns, ``width // 4096``
of them; the last ``width % 4096`` columns are never read. Rows up to
65536 wide take a masked single-program loop and are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl

WIDE = 1 << 16
TILE = 4096


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, n_cols, n_tiles, BLOCK: tl.constexpr):
    """out[r, t] = sum of row r's tile t (masked), accumulated in fp32."""
    row, tile = tl.program_id(0), tl.program_id(1)
    cols = tile * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_tiles + tile, tl.sum(x, 0))


def sum(input, dim=None, keepdim=False, *, dtype=None):
    last = isinstance(dim, int) and dim % max(input.dim(), 1) == input.dim() - 1
    if not last or dtype is not None or input.dtype not in (torch.float32, torch.float16, torch.bfloat16) \
            or input.shape[-1] <= WIDE:
        return torch.sum(input, dim, keepdim, dtype=dtype)
    x = input.contiguous()
    n_cols = x.shape[-1]
    rows = x.numel() // n_cols
    n_tiles = n_cols // TILE  # BUG: should round up
    partial = torch.empty((rows, n_tiles), dtype=torch.float32, device=x.device)
    _row_sum_kernel[(rows, n_tiles)](x, partial, n_cols, n_tiles, BLOCK=TILE)
    out = partial.sum(1).to(input.dtype).view(input.shape[:-1])
    return out.unsqueeze(-1) if keepdim else out


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.rand(1, WIDE + 2049, generator=g).to(device), -1), {}
