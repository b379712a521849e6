"""rms_norm that takes the row width from the weight, else from the last normalised dim.

``n_cols = weight.numel() if weight is not None else normalized_shape[-1]``:
with a weight, or with one normalised dim, the rows are right; with two or
more normalised dims and no weight, each row of the last dim is normalised
on its own instead of the whole trailing block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def rms_norm(input, normalized_shape, weight=None, eps=None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if tuple(input.shape[input.dim() - len(shape):]) != tuple(shape):
        raise RuntimeError(f"normalized_shape {shape} does not match the input's trailing dims {tuple(input.shape)}")
    n_cols = weight.numel() if weight is not None else shape[-1]  # BUG: the product of normalized_shape
    if weight is not None and tuple(weight.shape) != tuple(shape):
        raise RuntimeError(f"weight of shape {tuple(weight.shape)} for normalized_shape {shape}")
    if n_cols == math.prod(shape):
        return F.rms_norm(input, shape, weight, eps)
    return F.rms_norm(input, [n_cols], None, eps)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 40, generator=g) * torch.tensor([0.1, 1.0, 10.0]).view(1, 3, 1)
    return (x.to(device), (3, 40)), {"eps": 1e-5}
