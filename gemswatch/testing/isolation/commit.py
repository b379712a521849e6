"""The worker commits to a chunk's results before the judge picks which it checks.

The judge checks some repetitions of a timed chunk, picked at random after
the chunk ran (:mod:`..benchmark.isolated_timing`). Were the worker free to
produce those results only when asked, a candidate could do no work in its
timed repetitions and compute just the picked results afterwards, outside
the judge's clock. So each result of a chunk is digested where it is kept,
as the chunk runs (outside the timed windows, inside the judge's clock,
and likewise for the baseline in the judge), and the chunk's reply carries
the digests; a picked result must match its digest.

A digest is the float64 sum of a result's elements weighted by random
values drawn from a key the judge sends with the chunk (one weight tensor
per shape, the same on both sides). A candidate can give the digest of a
right result only by computing the result (or as much work as that), and
once given, it cannot change the result: the judge digests what it
receives itself.

Imports torch; never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["Digester", "leaves", "same_digest"]


def leaves(value: Any) -> list[torch.Tensor]:
    """The tensors of a result, in order (a tensor, or nested tuples and lists of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in leaves(v)]
    return []


class Digester:
    """Digests of results under one key (one chunk's)."""

    def __init__(self, key: int):
        self.key = int(key)
        self._weights: dict[tuple, torch.Tensor] = {}

    def _weight(self, t: torch.Tensor) -> torch.Tensor:
        where = (tuple(t.shape), t.device.type)
        w = self._weights.get(where)
        if w is None:
            g = torch.Generator(device=t.device).manual_seed((self.key ^ hash(where[0])) & (2**62 - 1))
            w = self._weights[where] = torch.randn(t.shape, generator=g, dtype=torch.float64, device=t.device)
        return w

    def digest(self, value: Any) -> list[float]:
        """Two numbers per tensor of ``value``: its weighted sum, and the sum of
        the weighted magnitudes (what a digest of the same bytes may differ by)."""
        out: list[float] = []
        for t in leaves(value):
            x = _real(t).to(torch.float64)
            weighted = x * self._weight(x)
            out += torch.stack([weighted.sum(), weighted.abs().sum()]).tolist()  # one wait for the device
        return out


def _real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return torch.view_as_real(t) if t.is_complex() else t


def same_digest(got: list[float], committed: Any) -> bool:
    """Whether a digest the judge made of what it received is the one the worker committed to."""
    if not isinstance(committed, list) or len(committed) != len(got):
        return False
    for i in range(0, len(got), 2):
        value, scale, want = got[i], got[i + 1], committed[i]
        if not isinstance(want, (int, float)):
            return False
        if math.isnan(value) or math.isnan(float(want)):
            if not (math.isnan(value) and math.isnan(float(want))):
                return False
        elif math.isinf(value) or math.isinf(float(want)):
            if value != float(want):
                return False
        elif abs(value - float(want)) > 1e-9 * scale + 1e-300:
            return False
    return True
