"""``softmax`` and ``log_softmax`` along any dim.

The input is viewed in memory order as (outer, n, inner) with the softmax dim
in the middle. With inner == 1 the rows are contiguous: short rows are packed
several per program, rows up to ``_launch.MAX_FUSED_SIZE`` take one pass in
registers (tiles of 64 KiB and more on a persistent grid that prefetches the
next rows, see ``_launch.pipelined_grid``), wider rows an online pass
(running max and rescaled sum) followed by a write pass. With inner > 1 a
program owns a block of contiguous columns of one slab and does the same down
the columns; few long columns split the reduced axis into pieces
(``_launch.ColumnLaunch``). Math in fp32, or in fp64 for a float64 result
(``COMPUTE``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _launch

__all__ = ["softmax", "log_softmax"]


@triton.jit
def _softmax_tile(x, AXIS: tl.constexpr, LOG: tl.constexpr, COMPUTE: tl.constexpr):
    """softmax (LOG: log_softmax) of a tile along AXIS: exp(x - max) / sum(exp(x - max))."""
    row_max = tl.max(x, AXIS, keep_dims=True)
    if LOG:
        shifted = x - row_max
        y = shifted - tl.log(tl.sum(tl.exp(shifted), AXIS, keep_dims=True))
    elif COMPUTE == tl.float64:
        numerator = tl.exp(x - row_max)
        y = numerator / tl.sum(numerator, AXIS, keep_dims=True)
    else:
        # exp(x - max) as exp2((x - max) * log2(e)). The difference comes
        # first: folded into one FMA, x * log2(e) - max * log2(e) keeps the
        # rounding error of max * log2(e), which at |x| ~ 1e15 exceeds 128
        # and turns the row's largest term into inf (and the row into NaN).
        # One division per row: a full-precision divide per element made
        # 16-bit rows of 32768 compute-bound on an H200.
        numerator = tl.math.exp2((x - row_max) * 1.4426950408889634)
        y = numerator * (1.0 / tl.sum(numerator, AXIS, keep_dims=True))
    return y


@triton.jit
def _online_update(m, d, x):
    """One step of the online normaliser: the new running max m and sum
    d = sum(exp(x - m)) per lane, d rescaled when m grows."""
    m_new = tl.maximum(m, x)
    # A lane that has seen only -inf keeps d = 0 (avoids -inf - -inf).
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    d = d * tl.exp(m - m_safe) + tl.exp(x - m_safe)
    return m_new, d


@triton.jit
def _softmax_rows_kernel(
    x_ptr, y_ptr, n_rows, n_cols,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """y = exp(x - max(x)) / sum(exp(x - max(x))) per row (LOG: y = x - max - log(sum));
    BLOCK_M whole rows of a contiguous (n_rows, n_cols) x per tile. A program
    walks tiles pid, pid + programs, ...; STAGES > 1 prefetches the next
    tiles into shared memory while this one is reduced and written."""
    cols = tl.arange(0, BLOCK_N)
    n_tiles = tl.cdiv(n_rows, BLOCK_M)
    for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=STAGES):
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        # Padding rows re-read the last row, so no lane computes -inf - -inf.
        load_rows = tl.minimum(rows, n_rows - 1)
        x = tl.load(
            x_ptr + load_rows.to(tl.int64)[:, None] * n_cols + cols[None, :],
            mask=(cols < n_cols)[None, :],
            other=float("-inf"),
        ).to(COMPUTE)
        y = _softmax_tile(x, 1, LOG, COMPUTE)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        tl.store(y_ptr + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], y, mask=mask)


@triton.jit
def _softmax_rows_online_kernel(x_ptr, y_ptr, n_cols, LOG: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr):
    """The same per row for rows wider than one block: a pass keeps a running
    max m and sum d = sum(exp(x - m)) per lane, rescaling d when m grows; a second pass writes y."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    m = tl.full((BLOCK_N,), float("-inf"), COMPUTE)
    d = tl.zeros((BLOCK_N,), COMPUTE)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(COMPUTE)
        m, d = _online_update(m, d, x)
    row_max = tl.max(m, 0)
    row_sum = tl.sum(d * tl.exp(m - row_max), 0)
    log_sum = tl.log(row_sum)
    inv_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(COMPUTE)
        if LOG:
            y = x - row_max - log_sum
        else:
            y = tl.exp(x - row_max) * inv_sum
        tl.store(y_row + cols, y, mask=mask)


@triton.jit
def _softmax_columns_kernel(
    x_ptr, y_ptr, n_reduce, n_inner,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, FUSED: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """y[a, :, k] = softmax(x[a, :, k]) (LOG: log_softmax) for contiguous (n_outer, n_reduce, n_inner) x;
    one program per (a, block of BLOCK_K columns); FUSED holds the whole column, else online + write pass."""
    pid = tl.program_id(0)
    k_blocks = tl.cdiv(n_inner, BLOCK_K)
    outer = pid // k_blocks
    inner = (pid % k_blocks) * BLOCK_K + tl.arange(0, BLOCK_K)
    inner_mask = inner < n_inner
    # Past the end of a column load -inf (weight 0); padding columns load 0s
    # instead, so no lane computes -inf - -inf.
    other = tl.where(inner_mask, float("-inf"), 0.0)[None, :]
    slab = outer.to(tl.int64) * n_reduce * n_inner
    x_slab = x_ptr + slab
    y_slab = y_ptr + slab
    if FUSED:
        n = tl.arange(0, BLOCK_N)
        mask = (n < n_reduce)[:, None] & inner_mask[None, :]
        offs = n.to(tl.int64)[:, None] * n_inner + inner[None, :]
        x = tl.load(x_slab + offs, mask=mask, other=other).to(COMPUTE)
        y = _softmax_tile(x, 0, LOG, COMPUTE)
        tl.store(y_slab + offs, y, mask=mask)
    else:
        m = tl.full((BLOCK_N, BLOCK_K), float("-inf"), COMPUTE)
        d = tl.zeros((BLOCK_N, BLOCK_K), COMPUTE)
        for start in range(0, n_reduce, BLOCK_N):
            n = start + tl.arange(0, BLOCK_N)
            mask = (n < n_reduce)[:, None] & inner_mask[None, :]
            offs = n.to(tl.int64)[:, None] * n_inner + inner[None, :]
            x = tl.load(x_slab + offs, mask=mask, other=other).to(COMPUTE)
            m, d = _online_update(m, d, x)
        col_max = tl.max(m, 0)
        col_sum = tl.sum(d * tl.exp(m - col_max[None, :]), 0)
        log_sum = tl.log(col_sum)
        inv_sum = 1.0 / col_sum
        for start in range(0, n_reduce, BLOCK_N):
            n = start + tl.arange(0, BLOCK_N)
            mask = (n < n_reduce)[:, None] & inner_mask[None, :]
            offs = n.to(tl.int64)[:, None] * n_inner + inner[None, :]
            x = tl.load(x_slab + offs, mask=mask, other=other).to(COMPUTE)
            if LOG:
                y = x - col_max[None, :] - log_sum[None, :]
            else:
                y = tl.exp(x - col_max[None, :]) * inv_sum[None, :]
            tl.store(y_slab + offs, y, mask=mask)


@triton.jit
def _column_piece(pid, n_reduce, n_inner, per_split, BLOCK_K: tl.constexpr):
    """Program ``pid``'s share of a split column softmax: its slab ``outer``,
    its piece (rows ``begin`` to ``end``) and its block of columns ``inner``.
    Neighbouring programs take the same rows of neighbouring columns."""
    k_blocks = tl.cdiv(n_inner, BLOCK_K)
    n_pieces = tl.cdiv(n_reduce, per_split)
    piece = pid // k_blocks % n_pieces
    outer = pid // (k_blocks * n_pieces)
    inner = (pid % k_blocks) * BLOCK_K + tl.arange(0, BLOCK_K)
    begin = piece * per_split
    return outer, piece, n_pieces, inner, begin, tl.minimum(begin + per_split, n_reduce)


@triton.jit
def _max_and_sum(m, d):
    """Combine running (max, sum) pairs along axis 0 into each column's max
    and sum of exp(x - max); a column that is -inf throughout has sum 0."""
    col_max = tl.max(m, 0)
    safe = tl.where(col_max == float("-inf"), 0.0, col_max)
    return col_max, tl.sum(d * tl.exp(m - safe[None, :]), 0)


@triton.jit
def _softmax_column_pieces_kernel(
    x_ptr, m_ptr, d_ptr, n_reduce, n_inner, per_split,
    COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """First half of a split column softmax of contiguous (n_outer, n_reduce,
    n_inner) x: per (piece of per_split rows, block of BLOCK_K columns), each
    column's max m and sum d = sum(exp(x - m)) over the piece, stored at
    [a, piece, k] of (n_outer, n_pieces, n_inner) m and d."""
    outer, piece, n_pieces, inner, begin, end = _column_piece(tl.program_id(0), n_reduce, n_inner, per_split, BLOCK_K)
    inner_mask = inner < n_inner
    other = tl.where(inner_mask, float("-inf"), 0.0)[None, :]
    x_slab = x_ptr + outer.to(tl.int64) * n_reduce * n_inner
    m = tl.full((BLOCK_N, BLOCK_K), float("-inf"), COMPUTE)
    d = tl.zeros((BLOCK_N, BLOCK_K), COMPUTE)
    for start in range(begin, end, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        mask = (n < end)[:, None] & inner_mask[None, :]
        x = tl.load(x_slab + n.to(tl.int64)[:, None] * n_inner + inner[None, :], mask=mask, other=other)
        m, d = _online_update(m, d, x.to(COMPUTE))
    piece_max, piece_sum = _max_and_sum(m, d)
    at = (outer.to(tl.int64) * n_pieces + piece) * n_inner + inner
    tl.store(m_ptr + at, piece_max, mask=inner_mask)
    tl.store(d_ptr + at, piece_sum, mask=inner_mask)


@triton.jit
def _softmax_column_write_kernel(
    x_ptr, y_ptr, m_ptr, d_ptr, n_reduce, n_inner, per_split,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PIECES: tl.constexpr,
):  # fmt: skip
    """Second half: combine the pieces' (m, d) of a block of columns and write
    this program's piece of y. Programs run in the reverse order of the first
    kernel's, so the pieces read last, likeliest still in L2, are read again
    first."""
    pid = tl.num_programs(0) - 1 - tl.program_id(0)
    outer, piece, n_pieces, inner, begin, end = _column_piece(pid, n_reduce, n_inner, per_split, BLOCK_K)
    inner_mask = inner < n_inner
    p = tl.arange(0, PIECES)
    at = (outer.to(tl.int64) * n_pieces + p)[:, None] * n_inner + inner[None, :]
    p_mask = (p < n_pieces)[:, None] & inner_mask[None, :]
    m = tl.load(m_ptr + at, mask=p_mask, other=float("-inf"))
    d = tl.load(d_ptr + at, mask=p_mask, other=0.0)
    col_max, col_sum = _max_and_sum(m, d)
    log_sum = tl.log(col_sum)
    inv_sum = 1.0 / col_sum
    other = tl.where(inner_mask, float("-inf"), 0.0)[None, :]
    slab = outer.to(tl.int64) * n_reduce * n_inner
    for start in range(begin, end, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        mask = (n < end)[:, None] & inner_mask[None, :]
        offs = n.to(tl.int64)[:, None] * n_inner + inner[None, :]
        x = tl.load(x_ptr + slab + offs, mask=mask, other=other).to(COMPUTE)
        if LOG:
            y = x - col_max[None, :] - log_sum[None, :]
        else:
            y = tl.exp(x - col_max[None, :]) * inv_sum[None, :]
        tl.store(y_ptr + slab + offs, y, mask=mask)


_SUPPORTED = "float16, bfloat16, float32, float64 results (integer and bool inputs with a float dtype)"


def _softmax(input: torch.Tensor, dim: int, dtype: torch.dtype | None, log: bool, name: str) -> torch.Tensor:
    out_dtype = dtype or input.dtype
    ndim = input.dim()
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"gems.{name}: dim {dim} is out of range for a tensor of {ndim} dims")
    if input.numel() == 0:  # as torch, whatever the dtypes: nothing to compute
        return torch.empty_like(input, dtype=out_dtype)
    if not out_dtype.is_floating_point or input.is_complex():
        raise TypeError(
            f"gems.{name}: dtype {input.dtype if input.is_complex() else out_dtype} is not supported "
            f"(supported: {_SUPPORTED})"
        )
    _launch.tl_dtype(out_dtype, f"gems.{name}", _SUPPORTED)  # rejects float8
    if not (input.dtype.is_floating_point and _launch.exact_cast(input.dtype, out_dtype)):
        # torch casts the input to ``dtype`` first; only an exact float
        # cast may wait for the kernel's load (fp16 -> bf16 rounds, say, and
        # an integer load would turn the -inf padding into a number).
        input = input.to(out_dtype)
    compute = tl.float64 if out_dtype == torch.float64 else tl.float32
    if ndim == 0:
        x, order, dim = input.reshape(1), None, 0
    else:
        dim %= ndim
        x = input
        order = _launch.dense_permutation(x) if not x.is_contiguous() else None
        if order is not None:  # transposed: work in memory order, return the same layout
            x = x.permute(order)
            dim = order.index(dim)
        else:
            x = x.contiguous()
    y = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    n_outer = x.shape[:dim].numel()
    n = x.shape[dim]
    n_inner = x.shape[dim + 1 :].numel()
    if n_inner == 1:
        launch = _launch.row_launch(n_outer, n)
        if launch.fused:
            tile_bytes = launch.block_rows * launch.block_cols * x.element_size()
            grid, stages = _launch.pipelined_grid(launch.grid(n_outer)[0], tile_bytes, x.device)
            _softmax_rows_kernel[grid](
                x, y, n_outer, n, LOG=log, COMPUTE=compute, BLOCK_M=launch.block_rows, BLOCK_N=launch.block_cols,
                STAGES=stages, num_warps=launch.num_warps,
            )  # fmt: skip
        else:
            _softmax_rows_online_kernel[(n_outer,)](
                x, y, n, LOG=log, COMPUTE=compute, BLOCK_N=launch.block_cols, num_warps=launch.num_warps
            )
    else:
        plan = _launch.column_launch(n_outer, n, n_inner, x.device)
        k_blocks = _launch.cdiv(n_inner, plan.block_k)
        if plan.n_splits == 1:
            _softmax_columns_kernel[(n_outer * k_blocks,)](
                x, y, n, n_inner, LOG=log, COMPUTE=compute, FUSED=plan.fused, BLOCK_N=plan.block_n,
                BLOCK_K=plan.block_k, num_warps=plan.num_warps,
            )  # fmt: skip
        else:
            pieces = torch.empty(
                (2, n_outer * plan.n_splits * n_inner), dtype=torch.float64 if compute == tl.float64 else torch.float32,
                device=x.device,
            )  # fmt: skip
            grid = (n_outer * plan.n_splits * k_blocks,)
            _softmax_column_pieces_kernel[grid](
                x, pieces[0], pieces[1], n, n_inner, plan.per_split, COMPUTE=compute, BLOCK_N=plan.block_n,
                BLOCK_K=plan.block_k, num_warps=plan.num_warps,
            )  # fmt: skip
            _softmax_column_write_kernel[grid](
                x, y, pieces[0], pieces[1], n, n_inner, plan.per_split, LOG=log, COMPUTE=compute,
                BLOCK_N=plan.block_n, BLOCK_K=plan.block_k, PIECES=_launch.next_pow2(plan.n_splits),
                num_warps=plan.num_warps,
            )  # fmt: skip
    if ndim == 0:
        return y.reshape(())
    if order is not None:
        return y.permute(_launch.inverse_permutation(order))
    return y


def softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax along ``dim``: ``exp(x - max) / sum(exp(x - max))``.

    Args:
        input: a tensor of any rank.
        dim: the dim to normalise; negative counts from the end.
        dtype: the result dtype; the input is cast to it first (as torch).
    Returns:
        A tensor of ``input``'s shape (and layout, for a transposed input).
    Raises:
        IndexError: ``dim`` is out of range. TypeError: unsupported dtype.
    """
    return _softmax(input, dim, dtype, log=False, name="softmax")


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Log-softmax along ``dim``: ``x - max - log(sum(exp(x - max)))``.

    Args:
        input: a tensor of any rank.
        dim: the dim to normalise; negative counts from the end.
        dtype: the result dtype; the input is cast to it first (as torch).
    Returns:
        A tensor of ``input``'s shape (and layout, for a transposed input).
    Raises:
        IndexError: ``dim`` is out of range. TypeError: unsupported dtype.
    """
    return _softmax(input, dim, dtype, log=True, name="log_softmax")
