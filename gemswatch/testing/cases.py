"""Black-box case helpers for the accuracy suites.

A suite built from these knows nothing of any kernel's blocks or branches:
sizes come from powers of two and their neighbours in every size class,
values from makers that stress the numerics (large magnitudes, tiny ones,
bfloat16 values that do not fit float16), layouts from makers of the views a
caller can pass (transposed, stepped, padded rows, expanded, permuted).

``record(x, width)`` notes what a case covered (size class, dtype, layout);
the correctness plugin collects the notes of each test into its report.

Imports torch; never pytest, the plugins or ``gemswatch.watch``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch

__all__ = [
    "SIZE_CLASSES",
    "LAYOUTS",
    "around_powers",
    "size_class",
    "size_tier",
    "class_widths",
    "wide_values",
    "with_layout",
    "describe_layout",
    "record",
    "take_records",
]

# name -> (smallest, largest) width. "huge" is open-ended: the CPU tier stops
# a little past 65536, the GPU tier goes further.
SIZE_CLASSES: dict[str, tuple[int, int]] = {
    "tiny": (1, 16),
    "small": (17, 1024),
    "medium": (1025, 8192),
    "large": (8193, 65536),
    "huge": (65537, 1 << 24),
}

LAYOUTS = ("contiguous", "transposed", "stepped", "padded", "expanded", "permuted")


def around_powers(lo: int, hi: int) -> list[int]:
    """1 and every 2^k - 1, 2^k, 2^k + 1 within [lo, hi], ascending."""
    found = {1} if lo <= 1 <= hi else set()
    k = 1
    while (1 << k) - 1 <= hi:
        for n in ((1 << k) - 1, 1 << k, (1 << k) + 1):
            if lo <= n <= hi:
                found.add(n)
        k += 1
    return sorted(found)


def size_class(n: int) -> str:
    """The name of the size class ``n`` elements fall in ("empty" for 0)."""
    if n <= 0:
        return "empty"
    for name, (lo, hi) in SIZE_CLASSES.items():
        if lo <= n <= hi:
            return name
    return "huge"


def size_tier() -> str:
    """"gpu" where the kernels run on a GPU (larger sizes affordable), "cpu"
    under Triton's interpreter."""
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "gpu"


def class_widths(name: str, tier: str | None = None) -> list[int]:
    """Widths of size class ``name`` near powers of two, with odd remainders
    for the open "huge" class (a little past 65536 on the CPU tier)."""
    tier = tier or size_tier()
    lo, hi = SIZE_CLASSES[name]
    if name == "huge":
        top = 100_003 if tier == "cpu" else 1_048_583
        return [65537, 65536 + 2049, top] + ([131071, 262145] if tier == "gpu" else [])
    return around_powers(lo, hi)


def wide_values(
    gen: torch.Generator,
    shape: Sequence[int],
    dtype: torch.dtype,
    kind: str = "normal",
    *,
    device: str | torch.device | None = None,
    scale: float = 1.0,
) -> torch.Tensor:
    """Random values of ``shape`` and ``dtype`` of one ``kind``:

    - ``normal``: ``randn * scale`` (never integers);
    - ``large``: magnitudes near 1e4 (float16: 3e3), so ``exp`` of them
      overflows float32 unless the maximum is subtracted first;
    - ``tiny``: magnitudes near 1e-30 (float16: 1e-6, its subnormals);
    - ``beyond_half``: magnitudes from 1e5 to 1e15, which float16 cannot
      hold (for bfloat16 and float32) and whose squares summed still fit float32;
    - ``mixed``: ``randn`` times 10**uniform(-3, 3), several binades at once.
    """
    shape = tuple(shape)
    base = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "normal":
        values = base * scale
    elif kind == "large":
        values = base * (3e3 if dtype == torch.float16 else 1e4)
    elif kind == "tiny":
        values = base * (1e-6 if dtype == torch.float16 else 1e-30)
    elif kind == "beyond_half":
        exponent = torch.empty(shape, dtype=torch.float64).uniform_(5, 15, generator=gen)
        values = base.sign() * torch.pow(10.0, exponent)
    elif kind == "mixed":
        exponent = torch.empty(shape, dtype=torch.float64).uniform_(-3, 3, generator=gen)
        values = base * torch.pow(10.0, exponent)
    else:
        raise ValueError(f"wide_values: unknown kind {kind!r} (normal, large, tiny, beyond_half, mixed)")
    if dtype.is_floating_point:
        limit = torch.finfo(dtype).max
        values = values.clamp(-limit, limit)
    target = device if device is not None else _default_device()
    return values.to(dtype).to(target)


def _default_device() -> str:
    return "cpu" if size_tier() == "cpu" else "cuda"


def with_layout(make: Callable[[Sequence[int]], torch.Tensor], shape: Sequence[int], layout: str) -> torch.Tensor:
    """A tensor of logical ``shape`` in ``layout``, its storage filled by
    ``make(storage_shape)`` (a contiguous tensor):

    - ``contiguous``;
    - ``transposed``: the last two dims swapped in memory (2 dims or more);
    - ``stepped``: every other element of the last dim (a slice with step 2);
    - ``padded``: rows of a wider tensor, ``x[..., :k]`` (unit stride, row
      stride above k);
    - ``expanded``: the first dim broadcast from size 1 (stride 0);
    - ``permuted``: the dims stored in reverse order (3 or 4 dims read as
      a permuted view).
    """
    shape = tuple(shape)
    if layout == "contiguous" or not shape:
        return make(shape)
    if layout == "transposed":
        if len(shape) < 2:
            return make(shape)
        swapped = shape[:-2] + (shape[-1], shape[-2])
        return make(swapped).transpose(-1, -2)
    if layout == "stepped":
        wider = shape[:-1] + (2 * shape[-1] + 1,)
        return make(wider)[..., 1::2]
    if layout == "padded":
        wider = shape[:-1] + (shape[-1] + 3,)
        return make(wider)[..., : shape[-1]]
    if layout == "expanded":
        return make((1,) + shape[1:]).expand(shape)
    if layout == "permuted":
        reverse = shape[::-1]
        return make(reverse).permute(*range(len(shape) - 1, -1, -1))
    raise ValueError(f"with_layout: unknown layout {layout!r} ({', '.join(LAYOUTS)})")


def describe_layout(t: torch.Tensor) -> str:
    """The layout family of ``t``: 0-d, empty, contiguous, expanded,
    transposed (dense, the last two dims swapped), permuted (dense, other
    orders), padded (unit stride, gaps between rows)
    or stepped (any other strided view)."""
    if t.dim() == 0:
        return "0-d"
    if t.numel() == 0:
        return "empty"
    if t.is_contiguous():
        return "contiguous"
    sizes, strides = t.shape, t.stride()
    if any(st == 0 and sz > 1 for sz, st in zip(sizes, strides)):
        return "expanded"
    kept = [(st, sz) for sz, st in zip(sizes, strides) if sz > 1]
    kept.sort(reverse=True)
    expected = 1
    dense = True
    for st, sz in reversed(kept):
        if st != expected:
            dense = False
            break
        expected *= sz
    if dense:
        order = sorted(range(t.dim()), key=lambda d: -strides[d])
        identity = list(range(t.dim()))
        return "transposed" if order == identity[:-2] + identity[-2:][::-1] else "permuted"
    if t.stride(-1) == 1 or t.shape[-1] == 1:
        return "padded"
    return "stepped"


# Notes of what the cases covered, drained per test by the correctness
# plugin; a list in the test process, never shared with a candidate.
_RECORDS: list[dict[str, str]] = []


def record(x: torch.Tensor, width: int | None = None, **extra: str) -> None:
    """Note that a case ran on ``x``: its size class (of ``width``, default
    the element count), dtype and layout, plus any ``extra`` labels (e.g.
    ``dim="0"``)."""
    n = x.numel() if width is None else width
    note = {"size_class": size_class(n), "dtype": str(x.dtype).removeprefix("torch."), "layout": describe_layout(x)}
    note.update({k: str(v) for k, v in extra.items()})
    _RECORDS.append(note)


def take_records() -> list[dict[str, str]]:
    """The notes recorded since the last call, oldest first."""
    notes = list(_RECORDS)
    _RECORDS.clear()
    return notes
