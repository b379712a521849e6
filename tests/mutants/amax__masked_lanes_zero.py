"""amax whose single-block row kernel pads masked lanes with 0.

Rows up to 1024 wide are loaded in one power-of-two block with
``other=0.0`` for the lanes past the row's end, where the identity of a
maximum is -inf: a row of only negative values whose width is not a power
of two gets 0. Rows with a non-negative element, power-of-two widths, and
rows wider than 1024 (a looped path padded with -inf) are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _row_max_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """out[r] = max(x[r, :]) of a row-major x, NaN propagating."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < n_cols, other=0.0)  # BUG: other=-inf
    tl.store(out_ptr + row, tl.reduce(x, 0, _max_nan))


def amax(input, dim=(), keepdim=False):
    last = isinstance(dim, int) and input.dim() >= 1 and dim % input.dim() == input.dim() - 1
    if not last or not input.dtype.is_floating_point or input.dtype == torch.float64 \
            or not 0 < input.shape[-1] <= 1024 or input.numel() == 0:
        return torch.amax(input, dim, keepdim)
    x = input.contiguous()
    n_cols = x.shape[-1]
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _row_max_kernel[(x.numel() // n_cols,)](x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out.unsqueeze(-1) if keepdim else out


def witness():
    g = torch.Generator().manual_seed(0)
    return (-(torch.rand(3, 300, generator=g) + 0.5).to(device), 1), {}
