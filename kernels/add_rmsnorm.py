"""Fused residual add + RMSNorm in Triton, forward and backward.

    h = x + residual                        in fp32, stored rounded to x's dtype (the new residual)
    r = 1 / sqrt(mean(h^2) + eps)           one fp32 value per row, of the fp32 h
    y = h * r * gamma                       from the fp32 h

Backward, with upstream gradients dy and dh, u = dy * gamma, h the stored (rounded) h and r
computed again from that same h:

    dx = dresidual = dh + r * u - h * r^3 * mean(u * h)   mean over the N columns of the row
    dgamma         = sum over rows of dy * h * r          a sum over rows, never a mean

The backward is the gradient at one h: r must be the stored h's, not the forward's r of the fp32
h. The two terms of dx cancel (at N = 1, r u (1 - h^2 r^2) = r u eps / (h^2 + eps)), and an r of
another h than the one beside it leaves a difference of roundings of h where the cancelled
result is tiny (a row of tiny values, eps = 1e-12: 500x the allowed error in fp16).

Layout of the work, as kernels/rmsnorm.py: the forward runs one program per tile of ROWS rows by
BLOCK = next_power_of_2(N) columns, masks for the padding lanes and rows, every load upcast to
fp32 first; the backward runs programs over contiguous blocks of rows, each writing dx and
dresidual for its rows and one private row of fp32 partial dgamma sums, which a second kernel
reduces over programs (no atomics). Offsets are int64.

Contract (checked before any output is allocated): x, residual [M, N] and gamma [N] of one dtype
among fp32/fp16/bf16, on one device, any strides, 1 <= N <= 65536, eps a finite float > 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_like
from kernels._launch import launch, runtime_args
from kernels.rmsnorm import MAX_N, SUPPORTED_DTYPES, _backward_plan, _num_warps, _rows_per_tile, _sum_partials
from kernels.rmsnorm import check_contract as check_rmsnorm_contract


@triton.jit(**runtime_args("M"))
def _add_rmsnorm_forward(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    R,  # [M, N] residual, strides (stride_rm, stride_rn)
    G,  # [N] gamma, stride stride_g
    Y,  # [M, N] output, contiguous
    H,  # [M, N] output x + residual in x's dtype, contiguous
    M,
    N,
    stride_xm,
    stride_xn,
    stride_rm,
    stride_rn,
    stride_g,
    eps,
    ROWS: tl.constexpr,  # rows per program: a [ROWS, BLOCK] tile, one reduction per row
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    row_mask = rows < M
    mask = row_mask[:, None] & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + rows[:, None] * stride_rm + cols[None, :] * stride_rn, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(H + rows[:, None] * N + cols[None, :], h.to(H.dtype.element_ty), mask=mask)
    g = tl.load(G + cols * stride_g, mask=cols < N, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h, axis=1) / N + eps)
    y = h * rstd[:, None] * g[None, :]
    tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit(**runtime_args("M", "rows_per_program"))
def _add_rmsnorm_backward(
    H,  # [M, N] the stored h, contiguous
    G,  # [N] gamma, stride stride_g
    DY,  # [M, N] upstream gradient of y, strides (stride_dym, stride_dyn)
    DH,  # [M, N] upstream gradient of h, strides (stride_dhm, stride_dhn)
    DX,  # [M, N] output, contiguous
    DR,  # [M, N] output (dresidual, equal to dx), contiguous
    PARTIAL,  # [programs, N] fp32, one private row of dgamma partial sums per program
    M,
    N,
    stride_g,
    stride_dym,
    stride_dyn,
    stride_dhm,
    stride_dhn,
    eps,
    rows_per_program,
    ROWS: tl.constexpr,  # rows per loop iteration: a [ROWS, BLOCK] tile
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    col_mask = cols < N
    g = tl.load(G + cols * stride_g, mask=col_mask, other=0.0).to(tl.float32)
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for start in range(first, last, ROWS):
        rows = start + tl.arange(0, ROWS)
        row_mask = rows < last
        mask = row_mask[:, None] & col_mask[None, :]
        h = tl.load(H + rows[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        dh = tl.load(DH + rows[:, None] * stride_dhm + cols[None, :] * stride_dhn, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(h * h, axis=1) / N + eps)  # of the stored h: the gradient at that h
        u = dy * g[None, :]
        mean_uh = tl.sum(u * h, axis=1) / N
        dx = dh + rstd[:, None] * u - h * (rstd * rstd * rstd * mean_uh)[:, None]
        tl.store(DX + rows[:, None] * N + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        tl.store(DR + rows[:, None] * N + cols[None, :], dx.to(DR.dtype.element_ty), mask=mask)
        acc += dy * h * rstd[:, None]
    tl.store(PARTIAL + pid.to(tl.int64) * N + cols, tl.sum(acc, axis=0), mask=col_mask)


def check_contract(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, eps: float) -> None:
    """Raise before anything is allocated or written if the inputs are outside the contract."""
    check_rmsnorm_contract(x, gamma, eps)
    if not isinstance(residual, torch.Tensor):
        raise TypeError(f"residual must be a tensor, got {type(residual).__name__}")
    if tuple(residual.shape) != tuple(x.shape):
        raise ValueError(f"residual must have x's shape {tuple(x.shape)}, got {tuple(residual.shape)}")
    require_like("residual", residual, "x", x)


def _forward(x, residual, gamma, eps: float):
    """y and h."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    h = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m:
        block = triton.next_power_of_2(n)
        rows = _rows_per_tile(block)
        launch(
            _add_rmsnorm_forward, (triton.cdiv(m, rows),),
            x, residual, gamma, y, h, m, n, x.stride(0), x.stride(1),
            residual.stride(0), residual.stride(1), gamma.stride(0), float(eps),
            ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
        )
    return y, h


def _backward(h, gamma, dy, dh, eps: float):
    m, n = h.shape
    for name, t in (("dy", dy), ("dh", dh)):
        if tuple(t.shape) != (m, n) or t.device != h.device:
            raise ValueError(f"{name} must have shape {(m, n)} on {h.device}, got {tuple(t.shape)} on {t.device}")
    dx = torch.empty((m, n), dtype=h.dtype, device=h.device)
    dres = torch.empty((m, n), dtype=h.dtype, device=h.device)
    dgamma = torch.empty(n, dtype=gamma.dtype, device=h.device)
    if m == 0:
        return dx, dres, dgamma.zero_()
    block = triton.next_power_of_2(n)
    programs, rows = _backward_plan(m, block, h.device)
    rows_per_program = triton.cdiv(m, programs)
    programs = triton.cdiv(m, rows_per_program)
    partial = torch.empty((programs, n), dtype=torch.float32, device=h.device)
    launch(
        _add_rmsnorm_backward, (programs,),
        h, gamma, dy, dh, dx, dres, partial, m, n,
        gamma.stride(0), dy.stride(0), dy.stride(1), dh.stride(0), dh.stride(1), float(eps), rows_per_program,
        ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
    )
    block_p, block_n = (32, min(block, 128)) if h.device.type == "cuda" else (16, min(block, 2048))
    launch(_sum_partials, (triton.cdiv(n, block_n),), partial, dgamma, programs, n, BLOCK_P=block_p, BLOCK_N=block_n)
    return dx, dres, dgamma


class AddRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, gamma, eps):
        y, h = _forward(x, residual, gamma, eps)
        ctx.save_for_backward(h, gamma)
        ctx.eps = eps
        return y, h

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dh):
        h, gamma = ctx.saved_tensors
        dx, dres, dgamma = _backward(h, gamma, dy, dh, ctx.eps)
        return dx, dres, dgamma, None


@register_kernel(
    "add_rmsnorm",
    name="triton_add_rmsnorm",
    contract=Contract(dtypes=SUPPORTED_DTYPES, max_n=MAX_N),
    description="the project's Triton fused residual add + RMSNorm (h stored in x's dtype, y from the fp32 h)",
)
def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor,
                eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, h): h = x + residual in x's dtype, y = h / sqrt(mean(h^2) + eps) * gamma over a 2-D x's rows."""
    check_contract(x, residual, gamma, eps)
    if torch.is_grad_enabled() and (x.requires_grad or residual.requires_grad or gamma.requires_grad):
        return AddRMSNormFunction.apply(x, residual, gamma, eps)
    return _forward(x, residual, gamma, eps)
