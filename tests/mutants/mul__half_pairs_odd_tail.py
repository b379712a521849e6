"""mul whose 16-bit path handles elements in pairs and drops an odd last one.

For float16 and bfloat16 each program lane multiplies two neighbouring
elements (a common trick to move 32 bits per load); the grid covers
``n // 2`` pairs, so with an odd element count the last output element is
never written. float32, and even sizes, are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl


@triton.jit
def _mul_kernel(x_ptr, y_ptr, out_ptr, n, PAIRS: tl.constexpr, BLOCK: tl.constexpr):
    """out = x * y over flat contiguous operands, in fp32; PAIRS: BLOCK pairs a program."""
    if PAIRS:
        lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = lane < n // 2  # BUG: an odd last element belongs to no pair
        for half in tl.static_range(2):
            offs = 2 * lane + half
            x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
            y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
            tl.store(out_ptr + offs, x * y, mask=mask)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
        tl.store(out_ptr + offs, x * y, mask=mask)


def mul(input, other):
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor)) or input.shape != other.shape \
            or input.dtype != other.dtype or input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return torch.mul(input, other)
    x, y = input.contiguous(), other.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    pairs = x.element_size() == 2
    block = 512
    grid = (triton.cdiv(n // 2 if pairs else n, block),) if n > 1 or not pairs else (1,)
    _mul_kernel[grid](x, y, out, n, PAIRS=pairs, BLOCK=block)
    return out


def witness():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(17, generator=g), torch.randn(17, generator=g)
    return (x.to(device, torch.float16), y.to(device, torch.float16)), {}
