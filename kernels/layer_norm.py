"""LayerNorm in Triton, forward and backward.

    mu   = mean(x)                     over the N columns of a row
    var  = mean((x - mu)^2)            population variance, two passes (never E[x^2] - mu^2,
                                       which cancels catastrophically for rows like 1e4 + N(0, 1))
    r    = 1 / sqrt(var + eps)         mu and r: one fp32 value each per row, saved for backward
    y    = (x - mu) * r * weight + bias

Backward, with xhat = (x - mu) * r and g = dy * weight
(derivation: d xhat_j / d x_i = r * (delta_ij - 1/N - xhat_i xhat_j / N)):

    dx      = r * (g - mean(g) - xhat * mean(g * xhat))    means over the N columns of the row
    dweight = sum over rows of dy * xhat                    sums over the M rows, never means
    dbias   = sum over rows of dy

Layout of the work: the forward and dx run one program per ROWS rows (several where rows are
narrow: kernels._launch.rows_per_program) and loop over [ROWS, BLOCK] tiles with
BLOCK = min(next_power_of_2(N), MAX_BLOCK), so any N works; every load is upcast to fp32
before any arithmetic (this is also what keeps bf16 right in the Triton interpreter).
dweight and dbias run a grid of (column block, row group): each program writes one private
row of fp32 partial sums (no atomics), which a second kernel reduces over the row groups.
Row offsets are int64 (row * stride can pass 2^31 on large tensors).

Contract (checked before anything is allocated or launched): x [..., N] (leading dims flattened
into rows: a view where their strides allow, else a copy), weight [N] and bias
[N] of one dtype among fp32/fp16/bf16, on one device, any strides, N >= 1, eps a finite
float > 0. y, dx, dweight and dbias are contiguous and have their input's dtype.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import as_rows, require_float, require_like, require_runnable_device, require_tensors
from kernels._launch import launch, multiprocessors, rows_per_program, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 4096
CALLS = {"forward": 0, "backward": 0}


@triton.jit(**runtime_args("M"))
def _layer_norm_forward(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    W,  # [N] weight, stride stride_w
    B,  # [N] bias, stride stride_b
    Y,  # [M, N] output, contiguous
    MEAN,  # [M] fp32, mean of each row, for the backward
    RSTD,  # [M] fp32, 1 / sqrt(var + eps) of each row, for the backward
    M,
    N,
    stride_xm,
    stride_xn,
    stride_w,
    stride_b,
    eps,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles, one reduction per row
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < M
    x_row = X + row * stride_xm
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < N), other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=1)[:, None] / N
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=1)[:, None] / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols.to(tl.int64) * stride_w, mask=cols < N, other=0.0).to(tl.float32)
        b = tl.load(B + cols.to(tl.int64) * stride_b, mask=cols < N, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean, mask=in_rows)
    tl.store(RSTD + row, rstd, mask=in_rows)


@triton.jit(**runtime_args("M"))
def _layer_norm_backward_dx(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    W,  # [N] weight, stride stride_w
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    MEAN,  # [M] fp32 from the forward
    RSTD,  # [M] fp32 from the forward
    DX,  # [M, N] output, contiguous
    M,
    N,
    stride_xm,
    stride_xn,
    stride_w,
    stride_dym,
    stride_dyn,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles, one reduction per row
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < M
    x_row = X + row * stride_xm
    dy_row = DY + row * stride_dym
    mean = tl.load(MEAN + row, mask=in_rows)
    rstd = tl.load(RSTD + row, mask=in_rows)
    acc_gx = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    acc_g = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols.to(tl.int64) * stride_w, mask=cols < N, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols.to(tl.int64) * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd  # padding lanes: xhat = -mean * rstd, but g = 0 there
        g = dy * w
        acc_gx += g * xhat
        acc_g += g
    mean_gx = tl.sum(acc_gx, axis=1)[:, None] / N
    mean_g = tl.sum(acc_g, axis=1)[:, None] / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols.to(tl.int64) * stride_w, mask=cols < N, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols.to(tl.int64) * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd
        dx = (dy * w - mean_g - xhat * mean_gx) * rstd
        tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit(**runtime_args("M", "rows_per_group"))
def _layer_norm_backward_dwdb(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    MEAN,  # [M] fp32 from the forward
    RSTD,  # [M] fp32 from the forward
    PARTIAL_W,  # [groups, N] fp32, one private row of dweight partial sums per row group
    PARTIAL_B,  # [groups, N] fp32, the same for dbias
    M,
    N,
    stride_xm,
    stride_xn,
    stride_dym,
    stride_dyn,
    rows_per_group,
    ROWS: tl.constexpr,  # rows per loop iteration: a [ROWS, BLOCK_N] tile
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    col_off = cols.to(tl.int64)
    group = tl.program_id(1).to(tl.int64)
    first = group * rows_per_group
    last = tl.minimum(first + rows_per_group, M)
    acc_w = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
    acc_b = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
    for start in range(first, last, ROWS):
        rows = start + tl.arange(0, ROWS)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(X + rows[:, None] * stride_xm + col_off[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dym + col_off[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
        rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
        acc_w += dy * (x - mean[:, None]) * rstd[:, None]
        acc_b += dy
    tl.store(PARTIAL_W + group * N + cols, tl.sum(acc_w, axis=0), mask=col_mask)
    tl.store(PARTIAL_B + group * N + cols, tl.sum(acc_b, axis=0), mask=col_mask)


@triton.jit(**runtime_args("P"))
def _sum_partials(
    PARTIAL,  # [P, N] fp32, contiguous
    OUT,  # [N] output, contiguous, in the parameter's dtype
    P,
    N,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows[:, None] < P) & (cols[None, :] < N)
        block = tl.load(PARTIAL + rows[:, None].to(tl.int64) * N + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(block, axis=0)
    tl.store(OUT + cols, acc.to(OUT.dtype.element_ty), mask=cols < N)


def _block(n: int) -> int:
    return min(triton.next_power_of_2(n), MAX_BLOCK)


def _num_warps(block: int) -> int:
    return 4 if block <= 1024 else 8


def _dwdb_plan(m: int, n: int, device: torch.device) -> tuple[int, int, int]:
    """(BLOCK_N, rows per loop iteration, row groups) of the dweight/dbias reduction.

    On a GPU: narrow column blocks and enough row groups for about 4 programs per
    multiprocessor. In the interpreter programs and loop iterations run one after another,
    each with Python overhead: wide [ROWS, BLOCK_N] tiles and a few row groups (more than one,
    so that the partial-sum reduction is exercised too) keep it fast.
    """
    if device.type == "cuda":
        block_n = min(128, _block(n))
        groups = max(1, min(triton.cdiv(m, 8), (4 * multiprocessors(device)) // triton.cdiv(n, block_n)))
        return block_n, 8, groups
    block_n = _block(n)
    return block_n, max(1, min(16, 16384 // block_n)), max(1, min(m, 4))


def check_contract(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract."""
    require_tensors(("x", x), ("weight", weight), ("bias", bias))
    if x.dim() < 2:
        raise ValueError(f"x must be [..., N] with at least one leading dim, got shape {tuple(x.shape)}")
    n = x.shape[-1]
    if n < 1:
        raise ValueError(f"N = {n}: a row needs at least one column to have a mean")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.dim() != 1 or t.shape[0] != n:
            raise ValueError(f"{name} must have shape ({n},) to match x's last dimension, got {tuple(t.shape)}")
    require_float("x", x, SUPPORTED_DTYPES)
    for name, t in (("weight", weight), ("bias", bias)):
        require_like(name, t, "x", x)
    require_runnable_device(x, "x is")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}; the usual value is 1e-5")


def _forward(x, weight, bias, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    mean = torch.empty(m, dtype=torch.float32, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    if m:
        block = _block(n)
        rows = rows_per_program(m, block, x.device)
        launch(_layer_norm_forward, (triton.cdiv(m, rows),),
            x, weight, bias, y, mean, rstd, m, n,
            x.stride(0), x.stride(1), weight.stride(0), bias.stride(0), float(eps),
            ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
        )
    return y, mean, rstd


def _sum_over_groups(partial: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    groups, n = partial.shape
    block_n = min(_block(n), 128 if out.device.type == "cuda" else 2048)
    launch(_sum_partials, (triton.cdiv(n, block_n),), partial, out, groups, n, BLOCK_P=16, BLOCK_N=block_n)
    return out


def _backward(x, weight, dy, mean, rstd, need_dx: bool, need_dwdb: bool):
    m, n = x.shape
    if tuple(dy.shape) != (m, n) or dy.device != x.device:
        raise ValueError(f"dy must have shape {(m, n)} on {x.device}, got {tuple(dy.shape)} on {dy.device}")
    dx = dweight = dbias = None
    if need_dx:
        dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
        if m:
            block = _block(n)
            rows = rows_per_program(m, block, x.device)
            launch(_layer_norm_backward_dx, (triton.cdiv(m, rows),),
                x, weight, dy, mean, rstd, dx, m, n,
                x.stride(0), x.stride(1), weight.stride(0), dy.stride(0), dy.stride(1),
                ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
            )
    if need_dwdb:
        dweight = torch.empty(n, dtype=weight.dtype, device=x.device)
        dbias = torch.empty(n, dtype=weight.dtype, device=x.device)
        if m == 0:
            return dx, dweight.zero_(), dbias.zero_()
        block_n, rows, groups = _dwdb_plan(m, n, x.device)
        rows_per_group = triton.cdiv(m, groups)
        groups = triton.cdiv(m, rows_per_group)
        partial_w = torch.empty((groups, n), dtype=torch.float32, device=x.device)
        partial_b = torch.empty((groups, n), dtype=torch.float32, device=x.device)
        launch(_layer_norm_backward_dwdb, (triton.cdiv(n, block_n), groups),
            x, dy, mean, rstd, partial_w, partial_b, m, n,
            x.stride(0), x.stride(1), dy.stride(0), dy.stride(1), rows_per_group,
            ROWS=rows, BLOCK_N=block_n,
        )
        _sum_over_groups(partial_w, dweight)
        _sum_over_groups(partial_b, dbias)
    return dx, dweight, dbias


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, mean, rstd = _forward(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        CALLS["forward"] += 1
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        need_dx = ctx.needs_input_grad[0]
        need_dwdb = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        dx, dweight, dbias = _backward(x, weight, dy, mean, rstd, need_dx, need_dwdb)
        CALLS["backward"] += 1
        return dx, dweight, dbias, None


@register_kernel(
    "layer_norm",
    name="triton_layer_norm",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's Triton LayerNorm (population variance, any strides, bf16)",
)
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension of x[..., N] (leading dims flattened into rows)."""
    check_contract(x, weight, bias, eps)
    return LayerNormFunction.apply(as_rows(x), weight, bias, eps).view(x.shape)
