"""gelu whose persistent large-tensor kernel stops one block early.

Past 65536 elements, a fixed grid of programs strides over the blocks, up
to ``n - BLOCK`` instead of ``n``: the last partial block (``n % 2048``
elements, or the whole last block) is never written. Smaller tensors take
a one-block-per-program kernel and are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl

LARGE = 1 << 16
PROGRAMS = 8


@triton.jit
def _gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, PERSISTENT: tl.constexpr, BLOCK: tl.constexpr):
    """y = x/2 * (1 + erf(x / sqrt(2))) over a flat contiguous x, in fp32."""
    if PERSISTENT:
        # BUG: the bound should be n; the last block start at or past n - BLOCK is skipped
        for start in range(tl.program_id(0) * BLOCK, n - BLOCK, tl.num_programs(0) * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
            tl.store(y_ptr + offs, _gelu(x), mask=offs < n)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
        tl.store(y_ptr + offs, _gelu(x), mask=offs < n)


def gelu(input, approximate="none"):
    if approximate != "none" or input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return torch.nn.functional.gelu(input, approximate=approximate)
    x = input.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n > LARGE:
        _gelu_kernel[(PROGRAMS,)](x, out, n, PERSISTENT=True, BLOCK=2048)
    elif n:
        _gelu_kernel[(triton.cdiv(n, 1024),)](x, out, n, PERSISTENT=False, BLOCK=1024)
    return out.view(input.shape)


def witness():
    g = torch.Generator().manual_seed(0)
    return ((torch.randn(LARGE + 1, generator=g) * 3).to(device),), {}
