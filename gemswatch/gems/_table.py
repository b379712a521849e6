"""The dispatch-key table: which ATen overloads gems serves, and with what.

``_FULL_CONFIG`` lists every ATen overload gems can serve: its dispatch key
(``"_softmax"``), the public gems function originally bound to it and, where
the calling conventions differ, an adapter. The resolution helpers below turn
op names or dispatch keys into entries, and an entry into the *current*
``gemswatch.gems.<name>`` (re-read from the live module, so an override
installed before registering is what ATen calls). Registering the entries
with torch lives in :mod:`._registration`, the kernels in :mod:`._kernels`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import torch

from .ops.mm import addmm, addmm_, mm
from .ops.norm import layer_norm, native_layer_norm, rms_norm
from .ops.pointwise import add, gelu, mul, silu
from .ops.reduction import amax, mean, sum
from .ops.softmax import log_softmax, softmax

__all__ = ["OpEntry", "_FULL_CONFIG"]

_GEMS_MODULE = "gemswatch.gems"


class OpEntry(NamedTuple):
    """One ATen overload served by gems."""

    key: str  # ATen overload, "name" or "name.overload" (e.g. "add.Tensor")
    fn: Callable[..., Any]  # public gems function originally bound to the key
    # adapter(fn, *aten_args, **aten_kwargs): calls ``fn`` (torch-style
    # signature) for an ATen call; None when the conventions already agree.
    adapter: Callable[..., Any] | None = None


# ---------------------------------------------------------------------------
# Adapters: ATen calling convention -> public torch-style signature.
# Arguments arrive as the dispatcher boxes them: keyword-only schema arguments
# as keywords (only when not at their default), a wrapped Python number
# (``x + 2.0``) as a plain Python number.
# ---------------------------------------------------------------------------


def _adapt_add(fn, self, other, *, alpha=1):
    return fn(self, other) if alpha == 1 else fn(self, other, alpha=alpha)


def _adapt_gelu(fn, self, *, approximate="none"):
    return fn(self) if approximate == "none" else fn(self, approximate=approximate)


def _adapt_full_reduction(fn, self, *, dtype=None):
    return fn(self) if dtype is None else fn(self, dtype=dtype)


def _all_dims(dim) -> bool:
    # ATen reads dim=None and dim=[] as "reduce every dimension".
    return dim is None or len(dim) == 0


def _reduce_all(fn, self, keepdim, **extra):
    out = fn(self, **extra)
    return out.reshape([1] * self.dim()) if keepdim else out


def _adapt_dim_reduction(fn, self, dim, keepdim=False, *, dtype=None):
    extra = {} if dtype is None else {"dtype": dtype}
    if _all_dims(dim):
        return _reduce_all(fn, self, keepdim, **extra)
    return fn(self, list(dim), keepdim, **extra)


def _adapt_amax(fn, self, dim=(), keepdim=False):
    if _all_dims(dim):
        return _reduce_all(fn, self, keepdim)
    return fn(self, list(dim), keepdim)


def _adapt_softmax(fn, self, dim, half_to_float):
    # aten::_softmax(self, dim, half_to_float): half in, float32 out when set.
    return fn(self, dim, dtype=torch.float32 if half_to_float else None)


def _row_stats(input: torch.Tensor, normalized_shape) -> tuple[torch.Tensor, list[int], torch.dtype]:
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    # ATen keeps the statistics in fp32 for 16-bit inputs on CUDA, in the
    # input dtype on CPU.
    dtype = torch.float32 if input.is_cuda else input.dtype
    return input.float(), dims, dtype


def _adapt_native_layer_norm(fn, input, normalized_shape, weight, bias, eps):
    """aten::native_layer_norm -> (out, mean, rstd); ``fn`` is layer_norm."""
    if fn is layer_norm:  # not overridden: one kernel gives all three
        return native_layer_norm(input, normalized_shape, weight, bias, eps)
    # An override of layer_norm returns only ``out``; the statistics the
    # backward needs are computed here by torch's own kernels.
    out = fn(input, normalized_shape, weight, bias, eps)
    x, dims, dtype = _row_stats(input, normalized_shape)
    var, mu = torch.var_mean(x, dims, correction=0, keepdim=True)
    if 0 in normalized_shape:
        mu = torch.zeros_like(mu)  # as aten: an empty row has mean 0 (and rstd nan)
    return out, mu.to(dtype), torch.rsqrt(var + eps).to(dtype)


def _adapt_fused_rms_norm(fn, input, normalized_shape, weight, eps):
    """aten::_fused_rms_norm -> (out, rstd); ``fn`` is rms_norm. rstd is fp32
    like ATen's, computed by torch's own kernels (only the backward reads it)."""
    out = fn(input, normalized_shape, weight, eps)
    eps_ = torch.finfo(torch.float32).eps if eps is None else eps
    x, dims, _ = _row_stats(input, normalized_shape)
    rstd = torch.rsqrt(x.square().mean(dims, keepdim=True) + eps_)
    return out, rstd


def _adapt_inplace(fn, self, *args, **kwargs):
    fn(self, *args, **kwargs)
    return self  # the in-place schema returns its first argument


_FULL_CONFIG: tuple[OpEntry, ...] = (
    OpEntry("add.Tensor", add, _adapt_add),
    OpEntry("mul.Tensor", mul),
    OpEntry("gelu", gelu, _adapt_gelu),
    OpEntry("silu", silu),
    OpEntry("sum", sum, _adapt_full_reduction),
    OpEntry("sum.dim_IntList", sum, _adapt_dim_reduction),
    OpEntry("mean", mean, _adapt_full_reduction),
    OpEntry("mean.dim", mean, _adapt_dim_reduction),
    OpEntry("amax", amax, _adapt_amax),
    OpEntry("_softmax", softmax, _adapt_softmax),
    OpEntry("_log_softmax", log_softmax, _adapt_softmax),
    # F.layer_norm and F.rms_norm are composite: they reach these overloads.
    OpEntry("native_layer_norm", layer_norm, _adapt_native_layer_norm),
    # Registered only where torch has a backend kernel for it (CUDA); on CPU
    # it is CompositeImplicitAutograd, so rms_norm stays torch's there.
    OpEntry("_fused_rms_norm", rms_norm, _adapt_fused_rms_norm),
    OpEntry("mm", mm),
    OpEntry("addmm", addmm),
    OpEntry("addmm_", addmm_, _adapt_inplace),
)


# ---------------------------------------------------------------------------
# Resolution: names and keys -> entries -> live functions.
# ---------------------------------------------------------------------------


def _config() -> tuple[OpEntry, ...]:
    module = sys.modules.get(_GEMS_MODULE)
    return tuple(OpEntry(*e) for e in getattr(module, "_FULL_CONFIG", _FULL_CONFIG))


def _valid_names(config: tuple[OpEntry, ...]) -> str:
    ops = sorted({e.fn.__name__ for e in config})
    keys = [e.key for e in config]
    return f"public op names {ops} or dispatch keys {keys} (from gemswatch.gems._FULL_CONFIG)"


def _select(config: tuple[OpEntry, ...], names: Iterable[str], what: str) -> set[str]:
    """The keys named by ``names`` (op names or dispatch keys)."""
    if isinstance(names, str):
        names = [names]
    selected: set[str] = set()
    for name in names:
        keys = {e.key for e in config if name in (e.key, e.fn.__name__)}
        if not keys:
            raise ValueError(f"{what}: unknown op or dispatch key {name!r}; expected {_valid_names(config)}")
        selected |= keys
    return selected


def _all_keys_except(config: tuple[OpEntry, ...], names: Iterable[str] | None, what: str) -> set[str]:
    """Every key of ``config`` but those named by ``names`` (op names or keys)."""
    return {e.key for e in config} - (_select(config, names, what) if names else set())


def _resolve_live(config: tuple[OpEntry, ...], key: str) -> Callable[..., Any]:
    """The function to register for ``key``: the current
    ``gemswatch.gems.<name of the function originally bound to key>``."""
    original = next((e.fn for e in config if e.key == key), None)
    if original is None:
        raise ValueError(
            f"dispatch key {key!r} is not in gemswatch.gems._FULL_CONFIG; refusing to register it "
            f"(valid keys come from gemswatch.gems._FULL_CONFIG: {[e.key for e in config]})"
        )
    module = sys.modules.get(_GEMS_MODULE)
    live = getattr(module, original.__name__, None)
    return live if callable(live) and live is not original else original
