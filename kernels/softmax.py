"""Softmax over the last dimension in Triton, forward and backward.

    m   = max_k x_k                    per row
    s   = sum_k exp(x_k - m)           m and s: one fp32 value each per row, saved for backward
    y_j = exp(x_j - m) / s

Backward, with p = softmax(x) recomputed in fp32 from x, m and s
(derivation: d p_j / d x_i = p_j (delta_ij - p_i)):

    c    = sum_k p_k dy_k
    dx_j = p_j * (dy_j - c)

Why m and s rather than y or logsumexp: y in fp16/bf16 carries its dtype's rounding into c,
which then cancels against dy; and m + log(s) rounds away log(s) entirely on rows of large
values (fp32 at -1e9 has an ulp of 64), while exp(x - m) / s keeps every digit.

Layout of the work: one program per ROWS rows (several where rows are narrow:
kernels._launch.rows_per_program), three passes over [ROWS, BLOCK] tiles with BLOCK =
min(next_power_of_2(N), MAX_BLOCK) (max, sum, write; the backward two), so any N works.
Padding lanes load -inf, which exp maps to 0; every load is upcast to fp32 before any
arithmetic (this is also what keeps bf16 right in the Triton interpreter). Row offsets are
int64 (row * stride can pass 2^31 on large tensors).

Contract (checked before anything is allocated or launched): x [..., N] of fp32/fp16/bf16 (the
leading dims are flattened into rows: a view where their strides allow, else a copy), any strides, on a CUDA device (or the CPU under TRITON_INTERPRET=1). y and dx are contiguous and
have x's dtype. An empty x gives an empty y.
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import as_rows, require_float, require_runnable_device, require_tensors
from kernels._launch import launch, rows_per_program, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 4096
CALLS = {"forward": 0, "backward": 0}


@triton.jit(**runtime_args("M"))
def _softmax_forward(
    X,  # [M, N] input, strides (stride_xm, stride_xn)
    Y,  # [M, N] output, contiguous
    MAX,  # [M] fp32, max of each row, for the backward
    SUM,  # [M] fp32, sum of exp(x - max) of each row, for the backward
    M,
    N,
    stride_xm,
    stride_xn,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles, one reduction per row
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < M
    x_row = X + row * stride_xm
    m_acc = tl.full([ROWS, BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < N), other=float("-inf")).to(tl.float32)
        m_acc = tl.maximum(m_acc, x)
    m = tl.max(m_acc, axis=1)[:, None]
    s_acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < N), other=float("-inf")).to(tl.float32)
        s_acc += tl.exp(x - m)
    s = tl.sum(s_acc, axis=1)[:, None]
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MAX + row, m, mask=in_rows)
    tl.store(SUM + row, s, mask=in_rows)


@triton.jit(**runtime_args("M"))
def _softmax_backward(
    X,  # [M, N] input of the forward, strides (stride_xm, stride_xn)
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    MAX,  # [M] fp32 from the forward
    SUM,  # [M] fp32 from the forward
    DX,  # [M, N] output, contiguous
    M,
    N,
    stride_xm,
    stride_xn,
    stride_dym,
    stride_dyn,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles, one reduction per row
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < M
    x_row = X + row * stride_xm
    dy_row = DY + row * stride_dym
    m = tl.load(MAX + row, mask=in_rows)
    s = tl.load(SUM + row, mask=in_rows)
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        dy = tl.load(dy_row + cols.to(tl.int64) * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        acc += tl.exp(x - m) / s * dy
    c = tl.sum(acc, axis=1)[:, None]
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        dy = tl.load(dy_row + cols.to(tl.int64) * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        dx = tl.exp(x - m) / s * (dy - c)
        tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=mask)


def _block(n: int) -> int:
    return min(triton.next_power_of_2(n), MAX_BLOCK)


def _num_warps(block: int) -> int:
    return 4 if block <= 1024 else 8


def check_contract(x: torch.Tensor) -> None:
    """Raise before anything is allocated or launched if the input is outside the contract."""
    require_tensors(("x", x))
    if x.dim() < 2:
        raise ValueError(f"x must be [..., N] with at least one leading dim, got shape {tuple(x.shape)}")
    require_float("x", x, SUPPORTED_DTYPES)
    require_runnable_device(x, "x is")


def _forward(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    row_max = torch.empty(m, dtype=torch.float32, device=x.device)
    row_sum = torch.empty(m, dtype=torch.float32, device=x.device)
    if m and n:
        block = _block(n)
        rows = rows_per_program(m, block, x.device)
        launch(_softmax_forward, (triton.cdiv(m, rows),),
            x, y, row_max, row_sum, m, n, x.stride(0), x.stride(1), ROWS=rows, BLOCK=block,
            num_warps=_num_warps(block),
        )
    return y, row_max, row_sum


def _backward(x, dy, row_max, row_sum):
    m, n = x.shape
    if tuple(dy.shape) != (m, n) or dy.device != x.device:
        raise ValueError(f"dy must have shape {(m, n)} on {x.device}, got {tuple(dy.shape)} on {dy.device}")
    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        block = _block(n)
        rows = rows_per_program(m, block, x.device)
        launch(_softmax_backward, (triton.cdiv(m, rows),),
            x, dy, row_max, row_sum, dx, m, n, x.stride(0), x.stride(1), dy.stride(0), dy.stride(1),
            ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
        )
    return dx


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y, row_max, row_sum = _forward(x)
        ctx.save_for_backward(x, row_max, row_sum)
        CALLS["forward"] += 1
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, row_max, row_sum = ctx.saved_tensors
        dx = _backward(x, dy, row_max, row_sum)
        CALLS["backward"] += 1
        return dx


@register_kernel(
    "softmax",
    name="triton_softmax",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's Triton softmax over rows (online max/sum, any strides, bf16)",
)
def softmax(x: torch.Tensor) -> torch.Tensor:
    """y = exp(x - max) / sum(exp(x - max)) along the last dimension of x[..., N] (leading dims flattened into rows)."""
    check_contract(x)
    return SoftmaxFunction.apply(as_rows(x)).view(x.shape)
