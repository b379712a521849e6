"""add whose large-tensor path launches whole blocks only.

Past 65536 elements the kernel switches to 4096-element blocks and sizes
its grid with ``n // BLOCK`` instead of a ceiling division: the last
``n % 4096`` elements of the output are never written. Smaller tensors,
and large ones that are a multiple of 4096, are right.
"""

from __future__ import annotations

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import torch
import triton
import triton.language as tl

LARGE = 1 << 16


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    """out = x + alpha * y over flat contiguous operands, in fp32."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x + alpha * y, mask=mask)


def add(input, other, *, alpha=1):
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor)) or input.shape != other.shape \
            or input.dtype != other.dtype or input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return torch.add(input, other, alpha=alpha)
    x, y = input.contiguous(), other.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    if n > LARGE:
        block = 4096
        grid = (n // block,)  # BUG: drops the partial last block
    else:
        block = 1024
        grid = (triton.cdiv(n, block),)
    _add_kernel[grid](x, y, out, alpha, n, BLOCK=block)
    return out


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(LARGE + 1, generator=g).to(device), torch.randn(LARGE + 1, generator=g).to(device)), {}
