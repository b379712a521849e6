"""layer_norm that takes the row width from the weight, else from the last normalised dim.

``n_cols = weight.numel() if weight is not None else normalized_shape[-1]``:
with a weight, or with one normalised dim, the rows are right; with two or
more normalised dims and no weight (bias alone or nothing), each row of the
last dim is normalised on its own instead of the whole trailing block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if tuple(input.shape[input.dim() - len(shape):]) != tuple(shape):
        raise RuntimeError(f"normalized_shape {shape} does not match the input's trailing dims {tuple(input.shape)}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != tuple(shape):
            raise RuntimeError(f"{name} of shape {tuple(p.shape)} for normalized_shape {shape}")
    n_cols = weight.numel() if weight is not None else shape[-1]  # BUG: the product of normalized_shape
    if n_cols == math.prod(shape):
        return F.layer_norm(input, shape, weight, bias, eps)
    y = F.layer_norm(input, [n_cols], None, None, eps)
    return y + bias if bias is not None else y


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 40, generator=g) + torch.tensor([-5.0, 0.0, 5.0]).view(1, 3, 1)
    return (x.to(device), (3, 40)), {}
