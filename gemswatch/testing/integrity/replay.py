"""The benchmark harness's replay check.

Owns :func:`check_replay`: the same case with fresh values in the same
tensors (:func:`refill_`) must give fresh, correct outputs
(:func:`compare_outputs`), so a candidate that caches results keyed on
shapes, tensors or pointers fails instead of looking fast. Takes torch as an
argument and never imports it (nor pytest or ``gemswatch.watch``).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Callable

from ._values import walk
from .error import IntegrityError

__all__ = ["STALE_DISTANCE", "STALE_RATIO", "refill_", "compare_outputs", "check_replay"]


def refill_(torch: ModuleType, values: Any, seed: int) -> int:
    """Give every floating-point tensor in ``values`` new contents, in place.

    Each finite non-zero element is multiplied by its own random factor in
    [0.5, 2]; the results are then handed back in the rank order of the old
    values. So every element and every sum or maximum changes, while order,
    signs, zeros and infinities survive: sorted inputs stay sorted, masks of
    -inf stay masks, positive inputs stay positive. The work stays on the
    tensor's device. Tensors whose elements overlap (stride 0) are left
    alone. Returns how many tensors were refilled.
    """
    generators: dict[Any, Any] = {}
    done = 0
    seen: set[int] = set()
    for _, t in walk(values, "inputs"):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0 or id(t) in seen:
            continue
        seen.add(id(t))
        if t.layout != torch.strided or any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
            continue
        if t.device not in generators:
            generators[t.device] = torch.Generator(device=t.device).manual_seed(seed)
        g = generators[t.device]
        with torch.no_grad():
            work = torch.float64 if t.dtype == torch.float64 else torch.float32
            flat = t.detach().reshape(-1).to(work)
            fresh = flat.clone()
            for part in (torch.isfinite(flat) & (flat > 0), torch.isfinite(flat) & (flat < 0)):
                old = flat[part]
                if old.numel() == 0:
                    continue
                factors = torch.empty(old.numel(), dtype=work, device=t.device).uniform_(0.5, 2.0, generator=g)
                placed = torch.empty_like(old)
                placed[old.argsort(stable=True)] = (old * factors).sort().values
                fresh[part] = placed
            t.detach().copy_(fresh.view(t.shape).to(t.dtype))
        done += 1
    return done


def _float_tensors(torch: ModuleType, value: Any) -> list:
    return [t for _, t in walk(value, "out") if isinstance(t, torch.Tensor) and t.is_floating_point()]


def compare_outputs(torch: ModuleType, got: Any, want: Any) -> tuple[float, float] | None:
    """``(||got - want||, ||want||)`` over the finite entries of two outputs
    (tensors or nested tuples of tensors), computed on their device in
    float64; the difference is inf when their non-finite entries differ.
    None when they are not comparable (another structure or shape, or no
    floating-point tensor)."""
    gs, ws = _float_tensors(torch, got), _float_tensors(torch, want)
    if not ws or len(gs) != len(ws):
        return None
    diff = norm = 0.0
    for g, w in zip(gs, ws):
        if g.shape != w.shape:
            return None
        g, w = g.detach().to(w.device, torch.float64), w.detach().to(torch.float64)
        finite = torch.isfinite(w)
        if not torch.equal(torch.isfinite(g), finite) or not torch.equal(g[~finite].nan_to_num(), w[~finite].nan_to_num()):
            diff = math.inf
        else:
            diff += float(((g[finite] - w[finite]) ** 2).sum())
        norm += float((w[finite] ** 2).sum())
    return math.sqrt(diff), math.sqrt(norm)


# A replayed result is off by about its own size; an honest one by rounding.
STALE_DISTANCE = 0.05
STALE_RATIO = 20.0


def check_replay(
    torch: ModuleType,
    op: str,
    call: Callable,
    baseline: Callable,
    args: tuple,
    kwargs: dict,
    *,
    clone: Callable[[tuple, dict], tuple[tuple, dict]],
    seed: int,
    sync: Callable[[], None] = lambda: None,
) -> bool:
    """The replay check: the same case with fresh values gives fresh, correct outputs.

    ``args``/``kwargs`` must hold the case's inputs as they were before the
    candidate first ran (a clone taken then: an in-place op has changed the
    originals since). Calls the candidate and the baseline (on a clone) with
    them, then refills the *same* tensors with fresh values (:func:`refill_`)
    and calls both again, so a cache keyed on shapes, tensor identity or data
    pointers returns what it returned before. Raises IntegrityError
    ('cached-output') when the candidate matched the baseline on the first
    inputs but not on the refilled ones. Returns False when the check does
    not apply (no floating-point output or input, outputs that are not
    comparable, a baseline that fails here, or a candidate that was already
    wrong: the correctness stage judges that), else True.
    """

    def pair() -> tuple[float, float] | None:
        try:
            ref_args, ref_kwargs = clone(args, kwargs)
            want = baseline(*ref_args, **ref_kwargs)
        except Exception:
            return None
        got = call(*args, **kwargs)
        sync()
        return compare_outputs(torch, got, want)  # before a refill overwrites an in-place result

    first = pair()
    if first is None or not refill_(torch, (args, kwargs), seed):
        return False
    second = pair()
    if second is None:
        return False
    scale = max(first[1], second[1], 1e-30)
    d_a, d_b = first[0] / scale, second[0] / scale
    if not d_a <= STALE_DISTANCE:
        return False  # wrong already: the correctness stage says so
    if d_b > max(STALE_DISTANCE, STALE_RATIO * d_a):
        raise IntegrityError(
            "cached-output",
            f"{op} matched the baseline on the case's inputs (relative error {d_a:.2g}) but not after the same "
            f"tensors were refilled with fresh values (relative error {d_b:.2g}); it must compute from its "
            "inputs on every call, not replay an earlier result",
        )
    return True
