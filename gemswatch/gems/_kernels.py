"""The Python kernels gems registers with ATen, and their fallback to torch.

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

import threading
from collections.abc import Callable, Iterable
from numbers import Number
from typing import Any

import torch

from ._device import device
from ._table import OpEntry

_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

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


def _scan(values: Iterable[Any], dtype: torch.dtype | None) -> tuple[bool, torch.dtype | None]:
    """Walk ``values`` (and nested lists/tuples): (False, _) at the first
    argument gems cannot take, else (True, the tensors' common dtype or the
    ``dtype`` passed in). A plain loop: it runs on every dispatched call."""
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.dtype not in _SUPPORTED_DTYPES or v.device.type != device:
                return False, dtype
            if dtype is None:
                dtype = v.dtype
            elif v.dtype != dtype:
                return False, dtype  # mixed dtypes: leave type promotion to torch
        elif isinstance(v, (list, tuple)):
            ok, dtype = _scan(v, dtype)
            if not ok:
                return False, dtype
        elif isinstance(v, torch.dtype):
            if v not in _SUPPORTED_DTYPES:
                return False, dtype
        elif isinstance(v, complex):
            return False, dtype
    return True, dtype


def _gems_can_run(args: tuple, kwargs: dict) -> bool:
    """True if every tensor is on gems.device with one supported dtype and no
    argument asks for another dtype (float64, integer, complex...)."""
    ok, dtype = _scan(args, None)
    if ok and kwargs:
        ok, dtype = _scan(kwargs.values(), dtype)
    return ok and dtype is not None


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
        # The autograd layer above this key already records the op. (The
        # grad mode is set directly: torch.no_grad() costs a dozen Python
        # calls per dispatched op.)
        grad = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        try:
            return adapter(fn, *args, **kwargs) if adapter is not None else fn(*args, **kwargs)
        finally:
            torch._C._set_grad_enabled(grad)
            _tls.depth = 0

    kernel.__name__ = f"gems_{entry.key.replace('.', '_')}"
    kernel.__qualname__ = kernel.__name__
    kernel.gems_fn = fn  # what this kernel calls, for introspection and tests
    return kernel
