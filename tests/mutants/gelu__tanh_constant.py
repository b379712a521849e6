"""gelu whose tanh approximation carries a mistyped cubic coefficient.

``approximate="tanh"`` is ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``;
this candidate writes the coefficient as 0.04715. The exact (erf) form is
right; the tanh form is off by up to about 1e-2 around |x| ~ 2.
"""

from __future__ import annotations

import math

import torch


def gelu(input, approximate="none"):
    if approximate == "tanh":
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        inner = math.sqrt(2 / math.pi) * (x + 0.04715 * x * x * x)  # BUG: 0.044715
        return (0.5 * x * (1 + torch.tanh(inner))).to(input.dtype)
    return torch.nn.functional.gelu(input, approximate=approximate)


def witness():
    from gemswatch.gems import device

    return (torch.linspace(-4, 4, 81).to(device),), {"approximate": "tanh"}
