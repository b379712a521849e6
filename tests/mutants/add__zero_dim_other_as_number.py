"""add that passes a 0-dim tensor second operand to its kernel as a Python number.

A scalar ``other`` goes through the kernel's scalar-argument variant, so a
0-dim tensor beside a dimensioned input is unwrapped with ``.item()``. That
loses the 0-dim tensor's dtype in type promotion: an integer tensor plus a
0-dim float64 (or float16) tensor should give float64 (float16) and gives
float32, the default for a Python float. Float tensors plus 0-dim float
tensors keep the tensor's dtype either way and are right.
"""

from __future__ import annotations

import torch


def add(input, other, *, alpha=1):
    if isinstance(input, torch.Tensor) and input.dim() > 0 and isinstance(other, torch.Tensor) and other.dim() == 0:
        other = other.item()  # BUG: a 0-dim tensor's dtype takes part in promotion; a number's does not
    return torch.add(input, other, alpha=alpha)


def witness():
    from gemswatch.gems import device

    x = torch.arange(-6, 6, dtype=torch.int32).reshape(3, 4).to(device)
    return (x, torch.tensor(1e300, dtype=torch.float64, device=device)), {}
