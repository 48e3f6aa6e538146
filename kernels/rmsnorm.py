"""RMSNorm in Triton, forward and backward, after the tutorial, with its named extensions.

    r = 1 / sqrt(mean(x^2) + eps)            one fp32 value per row, saved for backward
    y = x * r * gamma

Backward, with u = dy * gamma (derivation: d r / d x_i = -x_i r^3 / N):

    dx     = r * u - x * r^3 * mean(u * x)   mean over the N columns of the row
    dgamma = sum over rows of dy * x * r     a sum over rows, never a mean

Layout of the work: the forward runs one program per tile of ROWS rows by BLOCK =
next_power_of_2(N) columns (the tutorial's one row per program when BLOCK >= 16384), with masks
for the padding lanes and rows; every load is upcast to fp32 before
any arithmetic (this is also what keeps bf16 right in the Triton interpreter). The backward
runs programs over contiguous blocks of rows, loading the next row (tile) while it reduces
the current one; each writes dx for its rows and one private
row of fp32 partial dgamma sums (no atomics), which a second kernel reduces over programs.
With one row per program this is exactly the tutorial's per-row scheme. Offsets into
the inputs are int64, rows and columns alike: row * stride_xm passes 2^31 elements in a large
x, and col * stride_xn in a column-major one (the CUDA floor's index-width cases).

Contract (checked before any output is allocated): x [M, N] and gamma [N] of one dtype among
fp32/fp16/bf16, on one device, any strides, 1 <= N <= 65536, eps a finite float > 0.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_float, require_like, require_runnable_device
from kernels._launch import launch, multiprocessors, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_N = 65536
CALLS = {"forward": 0, "backward": 0}


@triton.jit(**runtime_args("M"))
def _rmsnorm_forward(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    G,  # [N] gamma, stride stride_g
    Y,  # [M, N] output, contiguous
    RSTD,  # [M] fp32, 1 / rms of each row, for the backward
    M,
    N,
    stride_xm,
    stride_xn,
    stride_g,
    eps,
    ROWS: tl.constexpr,  # rows per program: a [ROWS, BLOCK] tile, one reduction per row
    BLOCK: tl.constexpr,
    STORE_RSTD: tl.constexpr,  # False when no backward follows (inference): RSTD is not written
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    row_mask = rows < M
    mask = row_mask[:, None] & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + cols * stride_g, mask=cols < N, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * g[None, :]
    tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    if STORE_RSTD:
        tl.store(RSTD + rows, rstd, mask=row_mask)


@triton.jit
def _rows_of(X, DY, RSTD, start, last, cols, col_mask, stride_xm, stride_xn, stride_dym, stride_dyn,
             ROWS: tl.constexpr):
    """The [ROWS, BLOCK] tiles of x and dy (in their dtype) and the 1/rms of rows start.. start + ROWS,
    rows from ``last`` on masked out (reading nothing)."""
    rows = start + tl.arange(0, ROWS)
    row_mask = rows < last
    mask = row_mask[:, None] & col_mask[None, :]
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
    dy = tl.load(DY + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0)
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    return x, dy, rstd


@triton.jit(**runtime_args("M", "rows_per_program"))
def _rmsnorm_backward(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    G,  # [N] gamma, stride stride_g
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    RSTD,  # [M] fp32 from the forward
    DX,  # [M, N] output, contiguous
    PARTIAL,  # [programs, N] fp32, one private row of dgamma partial sums per program
    M,
    N,
    stride_xm,
    stride_xn,
    stride_g,
    stride_dym,
    stride_dyn,
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
    x_tile, dy_tile, rstd = _rows_of(X, DY, RSTD, first, last, cols, col_mask, stride_xm, stride_xn, stride_dym,
                                     stride_dyn, ROWS)
    for start in range(first, last, ROWS):
        # the next tile's loads are issued before this tile's reduction: their latency overlaps its work
        x_next, dy_next, rstd_next = _rows_of(X, DY, RSTD, start + ROWS, last, cols, col_mask, stride_xm, stride_xn,
                                              stride_dym, stride_dyn, ROWS)
        rows = start + tl.arange(0, ROWS)
        mask = (rows < last)[:, None] & col_mask[None, :]
        x = x_tile.to(tl.float32)
        dy = dy_tile.to(tl.float32)
        u = dy * g[None, :]
        mean_ux = tl.sum(u * x, axis=1) / N
        dx = rstd[:, None] * u - x * (rstd * rstd * rstd * mean_ux)[:, None]
        tl.store(DX + rows[:, None] * N + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        acc += dy * x * rstd[:, None]
        x_tile, dy_tile, rstd = x_next, dy_next, rstd_next
    tl.store(PARTIAL + pid.to(tl.int64) * N + cols, tl.sum(acc, axis=0), mask=col_mask)


@triton.jit(**runtime_args("P"))
def _sum_partials(
    PARTIAL,  # [P, N] fp32, contiguous
    OUT,  # [N] dgamma, in gamma's dtype
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
        block = tl.load(PARTIAL + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(block, axis=0)
    tl.store(OUT + cols, acc.to(OUT.dtype.element_ty), mask=cols < N)


def _num_warps(block: int) -> int:
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


def _rows_per_tile(block: int) -> int:
    # 16K fp32 elements per forward tile: 4 rows at N = 4096 measured best on the H200
    # (docs/gpu-runs.md), and fewer programs also make the interpreter faster.
    return max(1, min(16, 16384 // block))


def _backward_plan(m: int, block: int, device: torch.device) -> tuple[int, int]:
    """(programs, rows per loop iteration) of the backward.

    On a GPU: 2 programs per multiprocessor, one row per iteration, the next row's loads in flight
    during this row's reduction (measured best on the H200 at 32768x4096 bf16: 218 us against 267
    for 4 programs per SM without the prefetch; 1/2/4/8 programs per SM x 4/8/16 warps, run 46).
    In the interpreter, programs and loop iterations run one after another and each costs
    Python overhead: 16 programs and [ROWS, BLOCK] tiles keep it fast, with at least two tiles
    per program where it has two rows (else the prefetched tile is never read there).
    """
    if device.type == "cuda":
        return max(1, min(m, 2 * multiprocessors(device))), 1
    programs = max(1, min(m, 16))
    # at least two loop iterations wherever a program has two rows or more, so that the tile
    # loaded ahead (the second _rows_of call) is used in the interpreter as on the GPU
    half = triton.cdiv(triton.cdiv(m, programs), 2)
    return programs, min(_rows_per_tile(block), 1 << (half.bit_length() - 1))  # a power of two (a tile's shape)


def check_contract(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> None:
    """Raise before anything is allocated or written if the inputs are outside the contract."""
    if not isinstance(x, torch.Tensor) or not isinstance(gamma, torch.Tensor):
        raise TypeError(f"x and gamma must be tensors, got {type(x).__name__} and {type(gamma).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, N], got shape {tuple(x.shape)}; reshape it to (-1, N) first")
    n = x.shape[1]
    if gamma.dim() != 1 or gamma.shape[0] != n:
        raise ValueError(f"gamma must have shape ({n},) to match x's last dimension, got {tuple(gamma.shape)}")
    require_float("x", x, SUPPORTED_DTYPES)
    require_like("gamma", gamma, "x", x)
    require_runnable_device(x, "x is")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}; the usual value is 1e-6")
    if not 1 <= n <= MAX_N:
        raise ValueError(f"N = {n} is outside 1..{MAX_N}: a row must fit one program's block")


def _forward(x: torch.Tensor, gamma: torch.Tensor, eps: float, *, save: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """y, and the per-row 1/rms the backward needs (None when ``save`` is False: no backward follows)."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device) if save else None
    if m:
        block = triton.next_power_of_2(n)
        rows = _rows_per_tile(block)
        launch(
            _rmsnorm_forward, (triton.cdiv(m, rows),),
            x, gamma, y, y if rstd is None else rstd, m, n, x.stride(0), x.stride(1), gamma.stride(0), float(eps),
            ROWS=rows, BLOCK=block, STORE_RSTD=save, num_warps=_num_warps(block),
        )
    return y, rstd


def _backward(x, gamma, dy, rstd) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    if tuple(dy.shape) != (m, n) or dy.device != x.device:
        raise ValueError(f"dy must have shape {(m, n)} on {x.device}, got {tuple(dy.shape)} on {dy.device}")
    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
    dgamma = torch.empty(n, dtype=gamma.dtype, device=x.device)
    if m == 0:
        return dx, dgamma.zero_()
    block = triton.next_power_of_2(n)
    programs, rows = _backward_plan(m, block, x.device)
    rows_per_program = triton.cdiv(m, programs)
    programs = triton.cdiv(m, rows_per_program)
    partial = torch.empty((programs, n), dtype=torch.float32, device=x.device)
    launch(
        _rmsnorm_backward, (programs,),
        x, gamma, dy, rstd, dx, partial, m, n,
        x.stride(0), x.stride(1), gamma.stride(0), dy.stride(0), dy.stride(1), rows_per_program,
        ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
    )
    # GPU: many narrow column blocks spread the reduction over the SMs; interpreter: few wide ones
    block_p, block_n = (32, min(block, 128)) if x.device.type == "cuda" else (16, min(block, 2048))
    launch(_sum_partials, (triton.cdiv(n, block_n),), partial, dgamma, programs, n, BLOCK_P=block_p, BLOCK_N=block_n)
    return dx, dgamma


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, eps):
        y, rstd = _forward(x, gamma, eps)
        ctx.save_for_backward(x, gamma, rstd)
        CALLS["forward"] += 1
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, gamma, rstd = ctx.saved_tensors
        dx, dgamma = _backward(x, gamma, dy, rstd)
        CALLS["backward"] += 1
        return dx, dgamma, None


@register_kernel(
    "rmsnorm",
    name="triton_rmsnorm",
    contract=Contract(dtypes=SUPPORTED_DTYPES, max_n=MAX_N),
    description="the project's Triton RMSNorm (seed design, any strides, bf16, N up to 65536)",
)
def rmsnorm(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = x / sqrt(mean(x^2) + eps) * gamma over the last dimension of a 2-D x."""
    check_contract(x, gamma, eps)
    if torch.is_grad_enabled() and (x.requires_grad or gamma.requires_grad):
        return RMSNormFunction.apply(x, gamma, eps)
    CALLS["forward"] += 1  # inference: no autograd node, no 1/rms kept
    return _forward(x, gamma, eps, save=False)[0]
