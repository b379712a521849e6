"""Elementwise ops: ``add``, ``mul``, ``gelu`` and ``silu``.

One flat kernel per arity walks the output in the memory order of its first
dense full-size operand (plain contiguous order otherwise). Operands are read
through up to four coalesced strided dims, so broadcasts, transposes and
slices need no copies; a contiguous operand collapses to one dim of stride 1
and loads vectorise. Half types compute in fp32, float64 in float64.

A Python float reaches a kernel as an fp32 argument, so each kernel that
takes a float scalar also takes an fp64-typed copy (``*_fp64``), which only
its float64 branch reads.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from numbers import Number

import torch
import triton
import triton.language as tl

from . import _launch

__all__ = ["add", "mul", "gelu", "silu"]

_MAX_RANK = 4


@triton.jit
def _strided_offsets(offs, size1, size2, size3, stride0, stride1, stride2, stride3, RANK: tl.constexpr):
    """Offsets of a strided operand at flat row-major indices ``offs`` of a
    (size0, size1, size2, size3) shape whose last RANK dims are in use."""
    if RANK == 1:
        result = offs * stride3
    else:
        result = (offs % size3) * stride3
        rest = offs // size3
        if RANK == 2:
            result += rest * stride2
        else:
            result += (rest % size2) * stride2
            rest = rest // size2
            if RANK == 3:
                result += rest * stride1
            else:
                result += (rest % size1) * stride1 + (rest // size1) * stride0
    return result


@triton.jit
def _binary_kernel(
    x_ptr, y_ptr, out_ptr, y_value, alpha, y_value_fp64: tl.float64, alpha_fp64: tl.float64, n_elements,
    size1, size2, size3,
    x_stride0, x_stride1, x_stride2, x_stride3,
    y_stride0, y_stride1, y_stride2, y_stride3,
    IS_MUL: tl.constexpr, Y_IS_SCALAR: tl.constexpr, COMPUTE: tl.constexpr,
    RANK: tl.constexpr, INT64: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    """add: out = x + alpha * y;  mul: out = x * y.
    x and y are strided (y may be the scalar y_value); out is flat."""
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x_offs = _strided_offsets(offs, size1, size2, size3, x_stride0, x_stride1, x_stride2, x_stride3, RANK)
    x = tl.load(x_ptr + x_offs, mask=mask).to(COMPUTE)
    if Y_IS_SCALAR:
        if COMPUTE == tl.float64:
            # The fp64 copies enter the arithmetic as they are: tl.cast, or
            # a name bound in a branch, rounds a Python float through fp32
            # under the interpreter.
            if IS_MUL:
                out = x * y_value_fp64
            else:
                out = x + alpha_fp64 * y_value_fp64
        else:
            y = tl.cast(y_value, COMPUTE)
            if IS_MUL:
                out = x * y
            else:
                out = x + alpha * y
    else:
        y_offs = _strided_offsets(offs, size1, size2, size3, y_stride0, y_stride1, y_stride2, y_stride3, RANK)
        y = tl.load(y_ptr + y_offs, mask=mask).to(COMPUTE)
        if IS_MUL:
            out = x * y
        elif COMPUTE == tl.float64:
            out = x + alpha_fp64 * y
        else:
            out = x + alpha * y
    tl.store(out_ptr + offs, out, mask=mask)


@triton.jit
def _normal_tail(x):
    """Phi(-|x|), the standard normal's mass beyond |x|, without branches:
    erfc(|x| / sqrt(2)) / 2 by Abramowitz & Stegun 7.1.26 (the erf it implies
    is off by less than 1.5e-7), its constants pre-scaled so no separate
    1/sqrt(2) or 1/2 multiply and exp(-x^2/2) is a single exp2."""
    t = 1.0 / (1.0 + 0.2316419 * tl.abs(x))
    poly = t * (0.127414796 + t * (-0.142248368 + t * (0.7107068705 + t * (-0.7265760135 + t * 0.5307027145))))
    return poly * tl.math.exp2(x * x * -0.7213475204444817)


@triton.jit
def _unary_kernel(
    x_ptr, y_ptr, n_elements,
    size1, size2, size3,
    x_stride0, x_stride1, x_stride2, x_stride3,
    OP: tl.constexpr, COMPUTE: tl.constexpr, RANK: tl.constexpr, INT64: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    """gelu: y = x/2 * (1 + erf(x/sqrt(2))) (gelu_16bit: the same with a
    cheaper erf, for 16-bit tensors), tanh form: y = x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
    silu: y = x * sigmoid(x). Computed in COMPUTE (fp32, or fp64 for float64); x strided, y flat."""
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x_offs = _strided_offsets(offs, size1, size2, size3, x_stride0, x_stride1, x_stride2, x_stride3, RANK)
    x = tl.load(x_ptr + x_offs, mask=mask).to(COMPUTE)
    if OP == "gelu":
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif OP == "gelu_16bit":
        # x * Phi(x) with Phi(x) = 1 - Phi(-|x|) for x >= 0: exact in the
        # negative tail (no 1 - 1 cancellation). Its error (y off by
        # < |x| * 1e-7) is far below fp16/bf16 rounding. On an H200,
        # libdevice's branchy erf kept the 16-bit kernel at ~71 % of copy
        # bandwidth; this form reaches ~95 %.
        tail = _normal_tail(x)
        y = x * tl.where(x >= 0, 1.0 - tail, tail)
    elif OP == "gelu_tanh":
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        # (1 + tanh(z)) / 2 = sigmoid(2z): no cancellation where tanh(z) ~ -1
        y = x / (1.0 + tl.exp(-2.0 * inner))
    else:  # silu
        y = x / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offs, y, mask=mask)


def _coalesce(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every operand walks as one
    dim; returns (shape, per-operand strides), at least one dim."""
    dims: list[tuple[int, list[int]]] = []
    for i, size in enumerate(shape):
        if size == 1:
            continue
        inner = [st[i] for st in strides]
        if dims:
            outer_size, outer = dims[-1]
            if all(o == s * size for o, s in zip(outer, inner)):
                dims[-1] = (outer_size * size, inner)
                continue
        dims.append((size, inner))
    if not dims:
        dims = [(1, [0] * len(strides))]
    return [d[0] for d in dims], [[d[1][k] for d in dims] for k in range(len(strides))]


def _expanded_strides(out_shape: tuple[int, ...], shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """The strides of ``t.expand(out_shape)`` for ``t`` of ``shape`` and
    ``strides``: 0 along the dims it is broadcast over."""
    lead = len(out_shape) - len(shape)
    return [
        0 if i < lead or (shape[i - lead] == 1 and size != 1) else strides[i - lead]
        for i, size in enumerate(out_shape)
    ]


# Each operand's (shape, strides).
Layouts = tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


def _iteration_order(out_shape: tuple[int, ...], layouts: Layouts) -> list[int]:
    """Walk the output in the memory order of the first dense full-size
    operand, so a transposed input is read and written coalesced."""
    for shape, strides in layouts:
        if shape == out_shape and not _launch.is_contiguous(shape, strides):
            order = _launch.dense_order(shape, strides)
            if order is not None:
                return order
    return list(range(len(out_shape)))


@dataclass(frozen=True)
class _Layout:
    """How one problem (output shape, operand shapes and strides) launches:
    a pure function of those sizes, so it is computed once per problem."""

    flat_shape: tuple[int, ...]  # the output, contiguous in iteration order
    order: tuple[int, ...] | None  # iteration order of the caller's dims (None: theirs)
    gather: bool  # the operands are copied into iteration order first (too many dims)
    sizes: tuple[int, ...]  # size1..size3 of the kernel (size0 is implied)
    strides: tuple[tuple[int, ...], ...]  # per operand, stride0..stride3
    n_elements: int
    grid: tuple[int]
    meta: dict


def _launch_meta(n_elements: int, element_size: int, rank: int, int64: bool) -> tuple[tuple[int], dict]:
    block, num_warps = _launch.pointwise_launch(n_elements, element_size)
    meta = {"RANK": rank, "INT64": int64, "BLOCK_SIZE": block, "num_warps": num_warps}
    return (_launch.cdiv(n_elements, block),), meta


@functools.lru_cache(maxsize=1024)
def _flat_layout(out_shape: tuple[int, ...], n_operands: int, element_size: int) -> _Layout:
    """Everything contiguous and of the output's shape: one flat dim of stride 1."""
    n_elements = math.prod(out_shape)
    grid, meta = _launch_meta(n_elements, element_size, 1, _launch.offsets_need_int64(n_elements))
    return _Layout(out_shape, None, False, (1, 1, 1), ((0, 0, 0, 1),) * n_operands, n_elements, grid, meta)


@functools.lru_cache(maxsize=1024)
def _strided_layout(out_shape: tuple[int, ...], layouts: Layouts, element_size: int) -> _Layout:
    order = _iteration_order(out_shape, layouts)
    flat_shape = tuple(out_shape[d] for d in order)
    n_elements = math.prod(flat_shape)
    views = []  # each operand's strides as expanded to out_shape, then permuted
    for shape, strides in layouts:
        expanded = _expanded_strides(out_shape, shape, strides)
        views.append([expanded[d] for d in order])
    shape, strides = _coalesce(list(flat_shape), views)
    gather = len(shape) > _MAX_RANK
    extents = [sum((n - 1) * st for n, st in zip(flat_shape, v) if n > 0) for v in views]
    if gather:  # rare: the operands are gathered into iteration order, contiguous
        shape, strides, extents = [n_elements], [[1] for _ in views], []
    pad = _MAX_RANK - len(shape)
    int64 = _launch.offsets_need_int64(max([n_elements, *extents]))
    grid, meta = _launch_meta(n_elements, element_size, len(shape), int64)
    identity = order == list(range(len(out_shape)))
    return _Layout(
        flat_shape, None if identity else tuple(order), gather, tuple(([1] * pad + shape)[1:]),
        tuple(tuple([0] * pad + st) for st in strides), n_elements, grid, meta,
    )  # fmt: skip


class _Plan:
    """An output and its operands laid out for a flat strided launch."""

    __slots__ = ("flat", "out", "n_elements", "operands", "sizes", "strides", "grid", "meta")

    def __init__(self, out_shape, out_dtype, device, operands: list[torch.Tensor]):
        element_size = out_dtype.itemsize
        if all(t.is_contiguous() and t.shape == out_shape for t in operands):
            # The common case, checked first: it matters for host time on small tensors.
            layout = _flat_layout(out_shape, len(operands), element_size)
        else:
            layouts = tuple((tuple(t.shape), t.stride()) for t in operands)
            layout = _strided_layout(tuple(out_shape), layouts, element_size)
        # ``flat`` is contiguous in iteration order; ``out`` is the same
        # storage in the caller's dim order (a transposed input gives a
        # transposed output, as torch's empty_like would). The kernel reads
        # the operands through the layout's strides: the tensors themselves
        # are passed, as their views would have the same data pointer.
        self.flat = torch.empty(layout.flat_shape, dtype=out_dtype, device=device)
        order = layout.order
        self.out = self.flat if order is None else self.flat.permute(_launch.inverse_permutation(list(order)))
        if layout.gather:
            view_order = order or list(range(len(out_shape)))
            operands = [t.expand(out_shape).permute(view_order).contiguous() for t in operands]
        self.operands = operands
        self.n_elements = layout.n_elements
        self.sizes = layout.sizes
        self.strides = layout.strides
        self.grid = layout.grid
        self.meta = layout.meta


def _broadcast_shape(a: torch.Size, b: torch.Size) -> torch.Size:
    """torch's broadcasting rule (torch.broadcast_shapes is slow on the host)."""
    ndim = max(len(a), len(b))
    a, b = (1,) * (ndim - len(a)) + tuple(a), (1,) * (ndim - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(
                f"gems add/mul: the size of dim {i - ndim} differs ({x} vs {y}) and neither is 1; "
                f"shapes {list(a)} and {list(b)} do not broadcast"
            )
        out.append(y if x == 1 else x)
    return torch.Size(out)


# What the binary kernel accepts: every dtype Triton can load but complex.
_BINARY_DTYPES = "float16, bfloat16, float32, float64, integers and bool"


def _compute_dtype(dtype: torch.dtype, name: str):
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return tl.float32
    if dtype == torch.bool:
        return tl.int32
    return _launch.tl_dtype(dtype, f"gems.{name}", _BINARY_DTYPES)


def _check_alpha(alpha, result_dtype: torch.dtype) -> None:
    """torch's rule for ``alpha``: it must fit the result's kind (no bool
    alpha but for bool results, no float alpha for integer ones)."""
    if isinstance(alpha, bool) and result_dtype != torch.bool:
        raise RuntimeError("gems.add: Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, complex) and not result_dtype.is_complex:
        raise RuntimeError("gems.add: For non-complex input tensors, argument alpha must not be a complex number.")
    if not (result_dtype.is_floating_point or result_dtype.is_complex) and not isinstance(alpha, numbers.Integral):
        raise RuntimeError(
            "gems.add: For integral input tensors, argument alpha must not be a floating point number."
        )


def _fp64_scalar(value, compute) -> float:
    """The fp64-typed copy of a kernel scalar (0.0 where only integer math runs)."""
    # ``is``: Triton's dtype ``==`` costs a few calls on the host, and
    # _compute_dtype hands out its module-level dtype objects.
    return float(value) if compute is tl.float64 else 0.0


def _as_scalar(value, device: torch.device):
    """A 0-dim tensor on another device (e.g. a CPU scalar with a CUDA
    input) becomes a Python number, as torch allows."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.device != device:
        return value.item()
    return value


def _binary(input, other, alpha, is_mul: bool) -> torch.Tensor:
    tensors = [t for t in (input, other) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise TypeError("gems add/mul: at least one operand must be a tensor")
    result_dtype = torch.result_type(input, other)
    name = "mul" if is_mul else "add"
    compute = _compute_dtype(result_dtype, name)
    if not is_mul:
        _check_alpha(alpha, result_dtype)
    device = tensors[0].device
    input, other = _as_scalar(input, device), _as_scalar(other, device)
    if not isinstance(input, torch.Tensor):
        if is_mul:
            input, other = other, input
        else:
            # Through float64 like torch's scalars: a float64 result keeps
            # every digit, a narrower one rounds (1e300 -> inf) instead of raising.
            wide = torch.float64 if result_dtype.is_floating_point else None
            input = torch.tensor(input, dtype=wide, device=device).to(result_dtype)
    if not isinstance(other, torch.Tensor):
        # fold alpha on the host: out = x + (alpha * other)
        value = other if is_mul else other * alpha
        plan = _Plan(input.shape, result_dtype, device, [input])
        if plan.n_elements:
            _binary_kernel[plan.grid](
                plan.operands[0], plan.operands[0], plan.flat, value, 1, _fp64_scalar(value, compute), 1.0,
                plan.n_elements,
                *plan.sizes, *plan.strides[0], 0, 0, 0, 0,
                IS_MUL=is_mul, Y_IS_SCALAR=True, COMPUTE=compute, **plan.meta,
            )  # fmt: skip
        return plan.out
    if other.device != input.device:
        raise RuntimeError(f"gems add/mul: operands on {input.device} and {other.device}; move them to one device")
    out_shape = input.shape if input.shape == other.shape else _broadcast_shape(input.shape, other.shape)
    plan = _Plan(out_shape, result_dtype, device, [input, other])
    if plan.n_elements:
        _binary_kernel[plan.grid](
            plan.operands[0], plan.operands[1], plan.flat, 0, alpha, 0.0, _fp64_scalar(alpha, compute),
            plan.n_elements,
            *plan.sizes, *plan.strides[0], *plan.strides[1],
            IS_MUL=is_mul, Y_IS_SCALAR=False, COMPUTE=compute, **plan.meta,
        )  # fmt: skip
    return plan.out


def add(input: torch.Tensor, other: torch.Tensor | Number, *, alpha: Number = 1) -> torch.Tensor:
    """``input + alpha * other`` with torch broadcasting and type promotion.

    Args:
        input: a tensor (or a number, if ``other`` is a tensor).
        other: a tensor broadcastable with ``input``, or a number.
        alpha: multiplier of ``other``.
    Returns:
        A new tensor of the broadcast shape and the promoted dtype.
    Raises:
        TypeError: for dtypes the kernels do not support (complex).
        RuntimeError: ``alpha`` does not fit the result dtype (as torch: a
            float alpha for integer results, a bool alpha for non-bool ones).
    """
    return _binary(input, other, alpha, is_mul=False)


def mul(input: torch.Tensor, other: torch.Tensor | Number) -> torch.Tensor:
    """``input * other`` with torch broadcasting and type promotion.

    Args:
        input: a tensor (or a number, if ``other`` is a tensor).
        other: a tensor broadcastable with ``input``, or a number.
    Returns:
        A new tensor of the broadcast shape and the promoted dtype.
    Raises:
        TypeError: for dtypes the kernels do not support (complex).
    """
    return _binary(input, other, 1, is_mul=True)


_UNARY_DTYPES = "float16, bfloat16, float32, float64"


def _unary(input: torch.Tensor, op: str, name: str) -> torch.Tensor:
    if not input.dtype.is_floating_point:
        raise TypeError(f"gems.{name}: dtype {input.dtype} is not supported (supported: {_UNARY_DTYPES})")
    _launch.tl_dtype(input.dtype, f"gems.{name}", _UNARY_DTYPES)  # rejects float8
    compute = tl.float64 if input.dtype == torch.float64 else tl.float32
    plan = _Plan(input.shape, input.dtype, input.device, [input])
    if plan.n_elements:
        _unary_kernel[plan.grid](
            plan.operands[0], plan.flat, plan.n_elements, *plan.sizes, *plan.strides[0], OP=op, COMPUTE=compute,
            **plan.meta,
        )  # fmt: skip
    return plan.out


def gelu(input: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """Gaussian error linear unit, as ``torch.nn.functional.gelu``.

    Args:
        input: a floating point tensor.
        approximate: ``"none"`` (erf form) or ``"tanh"``.
    Returns:
        A new tensor like ``input``.
    Raises:
        ValueError: if ``approximate`` is neither ``"none"`` nor ``"tanh"``.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gems.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "tanh":
        return _unary(input, "gelu_tanh", "gelu")
    return _unary(input, "gelu_16bit" if input.element_size() == 2 else "gelu", "gelu")


def silu(input: torch.Tensor) -> torch.Tensor:
    """``input * sigmoid(input)``, as ``torch.nn.functional.silu``.

    Args:
        input: a floating point tensor.
    Returns:
        A new tensor like ``input``.
    """
    return _unary(input, "silu", "silu")
