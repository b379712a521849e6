"""log_softmax that honours ``dtype=`` by casting the result, not the
input: a half input is computed and rounded in half precision and only
then widened, so a float32 result carries float16 rounding errors.

Wrong when ``dtype`` is wider than the input's dtype; without ``dtype`` it
is right.
"""

from __future__ import annotations

import torch


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    shifted = input.float() - input.float().amax(dim, keepdim=True)
    out = (shifted - shifted.exp().sum(dim, keepdim=True).log()).to(input.dtype)
    return out.to(dtype) if dtype is not None else out  # BUG: rounded to the input dtype first


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 781, generator=g).half(), -1), {"dtype": torch.float32}
