"""Route ATen operators to the gems kernels through ``torch.library``.

``_FULL_CONFIG`` lists every ATen overload gems can serve: its dispatch key
(``"_softmax"``), the public gems function originally bound to it and, where
the calling conventions differ, an adapter. Registration re-reads the live
module: for each key it takes the original function's ``__name__`` and
registers the *current* ``gemswatch.gems.<name>``, so an override installed
before ``enable()`` / ``use_gems()`` is what ATen calls.

Every registered kernel is a small Python function that

* calls the gems function (through the adapter) when all tensor arguments
  are on ``gems.device`` with one dtype among float32/float16/bfloat16, and
* otherwise calls torch's own kernel for that dispatch key, captured with
  ``torch.library.get_kernel`` before gems first registered over it
  (integer index tensors, float64 references, other devices keep working).

While a gems function runs, every ATen call the same thread makes to a key we
registered goes straight to torch's kernel: a launcher, a candidate or
Triton's interpreter using ``torch.add`` on CPU tensors cannot recurse into
gems.

A key is registered only where torch has a kernel of its own for the device
(backend or CompositeExplicitAutograd): ``_fused_rms_norm`` is registered on
CUDA, where ``F.rms_norm`` reaches it, but not on CPU, where torch 2.13 has it
only as a composite and lacks the CPU backward a backend kernel would need.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from numbers import Number
from typing import Any, NamedTuple

import torch

from ._device import device
from .ops.mm import addmm, addmm_, mm
from .ops.norm import layer_norm, native_layer_norm, rms_norm
from .ops.pointwise import add, gelu, mul, silu
from .ops.reduction import amax, mean, sum
from .ops.softmax import log_softmax, softmax

__all__ = [
    "OpEntry",
    "_FULL_CONFIG",
    "enable",
    "only_enable",
    "use_gems",
    "all_registered_ops",
    "all_registered_keys",
]

_GEMS_MODULE = "gemswatch.gems"
_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


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


# ---------------------------------------------------------------------------
# Kernels: fallback to torch's own kernel, and the re-entrancy guard.
# ---------------------------------------------------------------------------

_tls = threading.local()
_NATIVE: dict[tuple[str, str], Any] = {}  # (key, dispatch key) -> torch's kernel


def _dispatch_key() -> str:
    return "CUDA" if device == "cuda" else "CPU"


def _qualified(key: str) -> str:
    return f"aten::{key}"


def _servable(key: str, dispatch_key: str) -> bool:
    """Whether gems can take ``key`` over at ``dispatch_key`` in this torch.

    The op must exist, and torch must have a kernel of its own there (a
    backend or CompositeExplicitAutograd kernel). An op that is only
    CompositeImplicitAutograd for this backend is left alone: giving it a
    backend kernel would switch its autograd to a formula whose backward
    kernel this backend may lack (aten::_fused_rms_norm on CPU: torch 2.13
    has no CPU _fused_rms_norm_backward).
    """
    name, _, overload = key.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, overload or "default"):
        return False  # e.g. _fused_rms_norm on a torch that predates it
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(_qualified(key), dispatch_key) or has(_qualified(key), "CompositeExplicitAutograd")


def _native_kernel(key: str, dispatch_key: str):
    """torch's kernel for ``key`` at ``dispatch_key``, captured the first
    time gems registers over it (so never one of ours)."""
    cached = _NATIVE.get((key, dispatch_key))
    if cached is None:
        get = getattr(torch.library, "get_kernel", None)
        if get is not None:
            cached = get(_qualified(key), dispatch_key)
        else:  # torch < 2.9: the same lookup, unwrapped
            cached = torch._C._dispatch_get_computed_kernel_for_dispatch_key(
                _qualified(key), getattr(torch._C.DispatchKey, dispatch_key)
            )
        _NATIVE[(key, dispatch_key)] = cached
    return cached


def _flat(values: Iterable[Any]) -> Iterator[Any]:
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _gems_can_run(args: tuple, kwargs: dict) -> bool:
    """True if every tensor is on gems.device with one supported dtype and no
    argument asks for another dtype (float64, integer, complex...)."""
    dtype = None
    for v in _flat((*args, *kwargs.values())):
        if isinstance(v, torch.Tensor):
            if v.device.type != device or v.dtype not in _SUPPORTED_DTYPES:
                return False
            if dtype is None:
                dtype = v.dtype
            elif v.dtype != dtype:
                return False  # mixed dtypes: leave type promotion to torch
        elif isinstance(v, torch.dtype):
            if v not in _SUPPORTED_DTYPES:
                return False
        elif isinstance(v, complex):
            return False
    return dtype is not None


def _as_tensor_args(schema, args: tuple) -> tuple:
    """Turn Python numbers back into tensors where the schema wants a Tensor.

    The dispatcher hands a wrapped number (``x + 2``) to Python kernels as a
    plain number, but torch's boxed kernel needs a tensor again. A 0-dim
    tensor of the dtype torch would promote to gives the same result dtype
    as the wrapped number.
    """
    if not any(isinstance(a, Number) for a in args):
        return args
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    out = list(args)
    for i, (arg, formal) in enumerate(zip(args, schema.arguments)):
        if isinstance(arg, Number) and isinstance(formal.type, torch._C.TensorType):
            value = torch.tensor(arg)
            out[i] = value if first is None else value.to(torch.result_type(first, arg))
    return tuple(out)


def _make_kernel(entry: OpEntry, fn: Callable[..., Any], dispatch_key: str) -> Callable[..., Any]:
    native = _native_kernel(entry.key, dispatch_key)
    name, _, overload = entry.key.partition(".")
    schema = getattr(getattr(torch.ops.aten, name), overload or "default")._schema
    adapter = entry.adapter

    def kernel(keyset, *args, **kwargs):
        if getattr(_tls, "depth", 0) or not _gems_can_run(args, kwargs):
            return native.call_boxed(keyset, *_as_tensor_args(schema, args), **kwargs)
        _tls.depth = 1
        try:
            # The autograd layer above this key already records the op.
            with torch.no_grad():
                return adapter(fn, *args, **kwargs) if adapter is not None else fn(*args, **kwargs)
        finally:
            _tls.depth = 0

    kernel.__name__ = f"gems_{entry.key.replace('.', '_')}"
    kernel.__qualname__ = kernel.__name__
    kernel.gems_fn = fn  # what this kernel calls, for introspection and tests
    return kernel


# ---------------------------------------------------------------------------
# Registrations: a stack of live libraries; the newest one is "current".
# ---------------------------------------------------------------------------


class _Registration(NamedTuple):
    lib: Any
    keys: tuple[str, ...]
    ops: tuple[str, ...]


_LOCK = threading.RLock()
_LIVE: list[_Registration] = []  # newest last
_ENABLED: _Registration | None = None  # the one made by enable()/only_enable() without lib


# torch.library can refuse a second Python kernel for the same op and
# dispatch key (a Python-side check on its private ``_impls`` set; torch 2.11
# refuses unless ``allow_override=True``, older versions have no switch),
# although the dispatcher itself allows it: the newest kernel wins and
# destroying it restores the previous one. Nested use_gems() relies on that.
_IMPL_OVERRIDES = "allow_override" in inspect.signature(torch.library.Library.impl).parameters


def _impl(lib, key: str, kernel, dispatch_key: str) -> None:
    if _IMPL_OVERRIDES:
        lib.impl(key, kernel, dispatch_key, with_keyset=True, allow_override=True)
        return
    getattr(torch.library, "_impls", set()).discard(f"aten/{key}/{dispatch_key}")
    lib.impl(key, kernel, dispatch_key, with_keyset=True)


def _register(lib, keys: set[str], config: tuple[OpEntry, ...]) -> _Registration:
    dispatch_key = _dispatch_key()
    plan = []
    for entry in config:  # config order, so registration order is stable
        if entry.key not in keys or not _servable(entry.key, dispatch_key):
            continue
        plan.append((entry, _resolve_live(config, entry.key)))
    kernels = [(entry, _make_kernel(entry, fn, dispatch_key)) for entry, fn in plan]
    with warnings.catch_warnings():
        # torch warns once when a kernel replaces an existing one: that is
        # the whole point here.
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        for entry, kernel in kernels:
            _impl(lib, entry.key, kernel, dispatch_key)
    ops = tuple(dict.fromkeys(entry.fn.__name__ for entry, _ in plan))
    record = _Registration(lib, tuple(entry.key for entry, _ in plan), ops)
    _LIVE.append(record)
    return record


def _unregister(record: _Registration | None) -> None:
    if record is None:
        return
    if record in _LIVE:
        _LIVE.remove(record)
    if record.lib.m is not None:
        record.lib._destroy()


def _register_new_lib(keys: set[str], config: tuple[OpEntry, ...]) -> _Registration:
    """Register into a fresh library, destroyed again if registering fails."""
    lib = torch.library.Library("aten", "IMPL")
    try:
        return _register(lib, keys, config)
    except BaseException:
        lib._destroy()
        raise


def _enable_keys(keys: set[str], config: tuple[OpEntry, ...], lib) -> None:
    global _ENABLED
    with _LOCK:
        if lib is not None:
            _register(lib, keys, config)
            return
        record = _register_new_lib(keys, config)
        _unregister(_ENABLED)  # enable() twice replaces the first registration
        _ENABLED = record


def enable(lib=None, unused: Iterable[str] | None = None) -> None:
    """Register every gems op with ATen for ``gems.device``, for the rest of
    the process.

    Args:
        lib: a ``torch.library.Library("aten", "IMPL")`` to register into (the
            caller destroys it to undo); default: a module-level library that
            a later ``enable()``/``only_enable()`` replaces.
        unused: op names (``"softmax"``) or dispatch keys (``"_softmax"``) to
            leave with torch's kernels.

    Raises:
        ValueError: a name in ``unused`` is neither a gems op nor a key of
            ``gems._FULL_CONFIG``.
    """
    config = _config()
    keys = _all_keys_except(config, unused, "enable(unused=...)")
    _enable_keys(keys, config, lib)


def only_enable(include: Iterable[str] = (), lib=None) -> None:
    """Register only the named gems ops (op names or dispatch keys), like
    ``enable()``.

    Raises:
        ValueError: ``include`` is empty, or names an unknown op or key.
    """
    config = _config()
    if not include:
        raise ValueError(f"only_enable: include is empty; name at least one of the {_valid_names(config)}")
    _enable_keys(_select(config, include, "only_enable(include=...)"), config, lib)


@contextlib.contextmanager
def use_gems(exclude: Iterable[str] | None = None, include: Iterable[str] | None = None) -> Iterator[None]:
    """Route ATen ops on ``gems.device`` to gems inside the ``with`` block.

    Registers into a fresh library on entry (``include`` wins over
    ``exclude``) and destroys it on exit, which restores whatever was
    registered before: torch's kernels, an ``enable()``, or an outer
    ``use_gems()``.

    Raises:
        ValueError: an unknown op name or dispatch key, on entry.
    """
    config = _config()
    if include:
        keys = _select(config, include, "use_gems(include=...)")
    else:
        keys = _all_keys_except(config, exclude, "use_gems(exclude=...)")
    with _LOCK:
        record = _register_new_lib(keys, config)
    try:
        yield
    finally:
        with _LOCK:
            _unregister(record)


def _disable() -> None:
    """Undo ``enable()``/``only_enable()`` made into the module-level library."""
    global _ENABLED
    with _LOCK:
        _unregister(_ENABLED)
        _ENABLED = None


def _current() -> _Registration | None:
    with _LOCK:
        # A library passed in by the caller may have been destroyed since.
        _LIVE[:] = [r for r in _LIVE if r.lib.m is not None]
        return _LIVE[-1] if _LIVE else None


def all_registered_ops() -> list[str]:
    """Public op names of the newest live registration, in config order
    (empty when nothing is registered)."""
    current = _current()
    return list(current.ops) if current else []


def all_registered_keys() -> list[str]:
    """Dispatch keys of the newest live registration, in config order."""
    current = _current()
    return list(current.keys) if current else []
