"""SwiGLU gate in Triton, forward and backward.

    s = sigmoid(a) = 1 / (1 + exp(-a))
    y = silu(a) * b = a * s * b                  elementwise

Backward (derivation: d silu(a) / d a = s + a * s * (1 - s)):

    da = dy * b * s * (1 + a * (1 - s))
    db = dy * a * s

Accuracy: the kernels only ever evaluate e = exp(-|a|), which lies in (0, 1] and never
overflows, and take s and 1 - s from it without cancellation:

    a >= 0:  s = 1 / (1 + e),  1 - s = e * s
    a <  0:  s = e / (1 + e),  1 - s = 1 / (1 + e)

For a < 0 the output is proportional to exp(a), whose relative condition number is |a|:
`tl.exp` on a GPU rounds a * log2(e) to fp32 before its approximate exp2, an error of about
|a| ulps (about 100 ulps at a = -80). `_exp_nonpositive` recovers that rounding with an
fma and corrects for it, so the result is good to a few ulps for every a on every backend.

Layout of the work: a 2-D grid of [ROWS, BLOCK_N] tiles (rows on the first axis, which has
no 65535 limit on a GPU), so any M and N work; every load is upcast to fp32 before any
arithmetic (this is also what keeps bf16 right in the Triton interpreter). Row offsets are
int64 (row * stride can pass 2^31 on large tensors).

Contract (checked before anything is allocated or launched): a [..., N] and b of a's shape (the
leading dims flattened into rows: a view where their strides allow, else a copy), of one dtype among fp32/fp16/bf16, on one device, any strides. y, da and db are contiguous and
have a's dtype. An empty a gives an empty y.
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import as_rows, require_float, require_like, require_runnable_device, require_tensors
from kernels._launch import launch, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 1024
TILE = 4096  # elements per program
CALLS = {"forward": 0, "backward": 0}
LOG2E = tl.constexpr(1.4426950408889634)
LOG2E_HI = tl.constexpr(1.4426950216293335)  # log2(e) rounded to fp32
LOG2E_LO = tl.constexpr(1.925963033500659e-08)  # log2(e) - LOG2E_HI
LN2 = tl.constexpr(0.6931471805599453)
# below this, exp underflows to 0 in fp32 (exp(-104) < half the smallest subnormal); clamping
# there keeps a = +-inf finite inside the exponent split (the fma of inf would be nan)
EXP_UNDERFLOW = tl.constexpr(-104.0)


@triton.jit
def _exp_nonpositive(x):
    """exp(x) for x <= 0 in fp32, to a few ulps.

    exp2(t) with t = fl(x * log2(e)) is off by the rounding of t, a relative error of about
    |t| ulps; that rounding, d = x * log2(e) - t, is recovered exactly enough with an fma on
    the split constant, and exp(x) = exp2(t) * 2**d = exp2(t) * (1 + d * ln 2) to first
    order (|d| < 2**-24 * |t|, so the second-order term is far below an ulp).
    """
    t = x * LOG2E
    d = tl.fma(x, LOG2E_LO, tl.fma(x, LOG2E_HI, -t))
    return tl.exp2(t) * (1.0 + d * LN2)


@triton.jit
def _sigmoid_pair(a):
    """(s, 1 - s) for s = sigmoid(a), both without overflow or cancellation."""
    e = _exp_nonpositive(tl.maximum(-tl.abs(a), EXP_UNDERFLOW))
    inv = 1.0 / (1.0 + e)
    s = tl.where(a >= 0, inv, e * inv)
    return s, tl.where(a >= 0, e * inv, inv)


@triton.jit(**runtime_args("M"))
def _swiglu_forward(
    A,  # [M, N] gate, strides (stride_am, stride_an)
    B,  # [M, N] value, strides (stride_bm, stride_bn)
    Y,  # [M, N] output, contiguous
    M,
    N,
    stride_am,
    stride_an,
    stride_bm,
    stride_bn,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    a = tl.load(A + rows[:, None] * stride_am + cols[None, :] * stride_an, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + rows[:, None] * stride_bm + cols[None, :] * stride_bn, mask=mask, other=0.0).to(tl.float32)
    s, _ = _sigmoid_pair(a)
    y = a * s * b
    tl.store(Y + rows[:, None] * N + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit(**runtime_args("M"))
def _swiglu_backward(
    A,  # [M, N] gate, strides (stride_am, stride_an)
    B,  # [M, N] value, strides (stride_bm, stride_bn)
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    DA,  # [M, N] output, contiguous
    DB,  # [M, N] output, contiguous
    M,
    N,
    stride_am,
    stride_an,
    stride_bm,
    stride_bn,
    stride_dym,
    stride_dyn,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    a = tl.load(A + rows[:, None] * stride_am + cols[None, :] * stride_an, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + rows[:, None] * stride_bm + cols[None, :] * stride_bn, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
    s, one_minus_s = _sigmoid_pair(a)
    da = dy * b * s * (1.0 + a * one_minus_s)
    db = dy * a * s
    out = rows[:, None] * N + cols[None, :]
    tl.store(DA + out, da.to(DA.dtype.element_ty), mask=mask)
    tl.store(DB + out, db.to(DB.dtype.element_ty), mask=mask)


def _tile(n: int) -> tuple[int, int]:
    """(ROWS, BLOCK_N): TILE elements per program, whole rows when N is small."""
    block_n = min(triton.next_power_of_2(n), MAX_BLOCK)
    return max(1, TILE // block_n), block_n


def check_contract(a: torch.Tensor, b: torch.Tensor) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract."""
    require_tensors(("a", a), ("b", b))
    if a.dim() < 2:
        raise ValueError(f"a must be [..., N] with at least one leading dim, got shape {tuple(a.shape)}")
    if b.shape != a.shape:
        raise ValueError(f"b must have a's shape {tuple(a.shape)}, got {tuple(b.shape)}")
    require_float("a", a, SUPPORTED_DTYPES)
    require_like("b", b, "a", a)
    require_runnable_device(a, "a is")


def _grid(m: int, n: int) -> tuple[tuple[int, int], int, int]:
    rows, block_n = _tile(n)
    return (triton.cdiv(m, rows), triton.cdiv(n, block_n)), rows, block_n


def _forward(a, b):
    m, n = a.shape
    y = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m and n:
        grid, rows, block_n = _grid(m, n)
        launch(_swiglu_forward, grid,
            a, b, y, m, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), ROWS=rows, BLOCK_N=block_n
        )
    return y


def _backward(a, b, dy):
    m, n = a.shape
    if tuple(dy.shape) != (m, n) or dy.device != a.device:
        raise ValueError(f"dy must have shape {(m, n)} on {a.device}, got {tuple(dy.shape)} on {dy.device}")
    da = torch.empty((m, n), dtype=a.dtype, device=a.device)
    db = torch.empty((m, n), dtype=b.dtype, device=a.device)
    if m and n:
        grid, rows, block_n = _grid(m, n)
        launch(_swiglu_backward, grid,
            a, b, dy, da, db, m, n,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), dy.stride(0), dy.stride(1),
            ROWS=rows, BLOCK_N=block_n,
        )
    return da, db


class SwiGLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        CALLS["forward"] += 1
        return _forward(a, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        da, db = _backward(a, b, dy)
        CALLS["backward"] += 1
        return da, db


@register_kernel(
    "swiglu",
    name="triton_swiglu",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's Triton SwiGLU silu(a) * b (2-D tiles, any strides, bf16)",
)
def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y = silu(a) * b = a * sigmoid(a) * b elementwise, for a and b [..., N] of one shape (leading dims flattened into rows)."""
    check_contract(a, b)
    return SwiGLUFunction.apply(as_rows(a), as_rows(b)).view(a.shape)
