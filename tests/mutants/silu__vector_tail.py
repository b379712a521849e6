"""silu whose vectorised path for long float32 tensors drops a ragged tail.

Above 4096 elements the kernel processes four elements a lane and launches
enough lanes for ``n // 4`` groups: the last ``n % 4`` elements are never
written. Short tensors, 16-bit ones, and lengths that are a multiple of 4
are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl

VECTOR_MIN = 4096


@triton.jit
def _silu_kernel(x_ptr, y_ptr, n, VEC: tl.constexpr, BLOCK: tl.constexpr):
    """y = x / (1 + exp(-x)) over a flat contiguous x, in fp32; VEC elements a lane."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if VEC > 1:
        mask = lane < n // VEC  # BUG: a partial last group has no lane
    else:
        mask = lane < n
    for k in tl.static_range(VEC):
        offs = lane * VEC + k
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, x / (1.0 + tl.exp(-x)), mask=mask)


def silu(input):
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return torch.nn.functional.silu(input)
    x = input.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    vec = 4 if n > VECTOR_MIN and x.dtype == torch.float32 else 1
    if n:
        _silu_kernel[(triton.cdiv(triton.cdiv(n, vec), 1024),)](x, out, n, VEC=vec, BLOCK=1024)
    return out.view(input.shape)


def witness():
    g = torch.Generator().manual_seed(0)
    return ((torch.randn(4097, generator=g) * 3).to(device),), {}
