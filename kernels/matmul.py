"""Matrix product with a bias and an activation epilogue in Triton, forward and backward.

    z = a @ b + bias              a [M, K], b [K, N], bias [N]; fp32 accumulator
    y = act(z)                    none, relu, or gelu_tanh(z) = z * sigmoid(2 u),
                                  u = sqrt(2 / pi) (z + 0.044715 z^3)

(0.5 z (1 + tanh(u)) = z * sigmoid(2 u): the sigmoid form has no 1 + tanh(u) to cancel for
z << 0.) Backward, with dz = dy * act'(z) (relu' = 0 for z <= 0, else 1, NaN included: as torch):

    da = dz @ b^T,   db = a^T @ dz,   dbias = 1^T @ dz        (sum of dz over rows)

All three are launches of the same tiled kernel on strided views (b^T, a^T: no copies);
gelu_tanh'(z) = s + 2 z s (1 - s) u'(z), s = sigmoid(2 u), u' = sqrt(2 / pi) (1 + 3 * 0.044715 z^2).
The forward keeps z (fp32) for the backward when there is an activation; dz is fp32.

Tiles: [BLOCK_M, BLOCK_N] of the output per program, a loop over K in BLOCK_K steps with every
load masked on its rows, columns and K (padding reads 0, which adds nothing to a dot). fp32
inputs take tl.dot with input_precision="ieee" (no TF32: the op holds fp32 inputs to fp32
products); fp16/bf16 inputs take the dot in their dtype with an fp32 accumulator. Under the
Triton interpreter, and when the two operands' dtypes differ (fp32 dz against bf16 b), the
operands are upcast to fp32 first (the interpreter cannot do bf16 arithmetic). Offsets are
int64.

Contract (checked before anything is allocated or launched): a [M, K], b [K, N] and bias [N] of
one dtype among fp32/fp16/bf16, on one device, any strides; activation one of ACTIVATIONS.
y, da, db, dbias are contiguous in a's dtype. M, N or K = 0 works (K = 0: y = act(bias)).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_float, require_like, require_runnable_device, require_tensors
from kernels._launch import launch, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = {"none": 0, "relu": 1, "gelu_tanh": 2}
CALLS = {"forward": 0, "backward": 0}
# tensor * constexpr, never constexpr * tensor: the interpreter wraps the latter in a constexpr
GELU_K = tl.constexpr(0.7978845608028654)  # sqrt(2 / pi)
GELU_2K = tl.constexpr(1.5957691216057308)  # 2 sqrt(2 / pi)
GELU_C = tl.constexpr(0.044715)
GELU_3C = tl.constexpr(0.134145)
EXP_UNDERFLOW = tl.constexpr(-104.0)  # exp below this is 0 in fp32; clamping keeps inf out of e


@triton.jit
def _sigmoid_pair(t):
    """(s, 1 - s) for s = sigmoid(t), from e = exp(-|t|) in (0, 1]: no overflow, no cancellation."""
    e = tl.exp(tl.maximum(-tl.abs(t), EXP_UNDERFLOW))
    inv = 1.0 / (1.0 + e)
    return tl.where(t >= 0, inv, e * inv), tl.where(t >= 0, e * inv, inv)


@triton.jit(**runtime_args("stride_bias"))  # the bias is read once per tile: its load width is not measurable
def _matmul(
    A,  # [M, K], strides (stride_am, stride_ak)
    B,  # [K, N], strides (stride_bk, stride_bn)
    BIAS,  # [N], stride stride_bias (unused without HAS_BIAS)
    Y,  # [M, N] output, contiguous
    Z,  # [M, N] fp32 pre-activation, contiguous (written only with STORE_Z)
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_bias,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,  # 0 none, 1 relu, 2 gelu_tanh
    STORE_Z: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        a = tl.load(A + rm[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rm < M)[:, None] & (ks < K)[None, :], other=0.0)
        b = tl.load(B + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(ks < K)[:, None] & (rn < N)[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(BIAS + rn * stride_bias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    out = rm[:, None] * N + rn[None, :]
    if STORE_Z:
        tl.store(Z + out, acc, mask=mask)
    if ACTIVATION == 1:
        acc = tl.where(acc < 0, 0.0, acc)  # relu; a NaN stays NaN, as torch.relu
    elif ACTIVATION == 2:
        s, _ = _sigmoid_pair((acc + acc * acc * acc * GELU_C) * GELU_2K)
        acc = acc * s
    tl.store(Y + out, acc.to(Y.dtype.element_ty), mask=mask)


@triton.jit(**runtime_args("M"))
def _activation_grad(
    Z,  # [M, N] fp32 pre-activation, contiguous
    DY,  # [M, N] upstream gradient, strides (stride_dym, stride_dyn)
    DZ,  # [M, N] fp32 output, contiguous
    M,
    N,
    stride_dym,
    stride_dyn,
    ACTIVATION: tl.constexpr,  # 1 relu, 2 gelu_tanh
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    out = rm[:, None] * N + rn[None, :]
    z = tl.load(Z + out, mask=mask, other=0.0)
    dy = tl.load(DY + rm[:, None] * stride_dym + rn[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
    if ACTIVATION == 1:
        dz = tl.where(z <= 0, 0.0, dy)  # a NaN z passes dy on, as torch's relu backward
    else:
        s, one_minus_s = _sigmoid_pair((z + z * z * z * GELU_C) * GELU_2K)
        du = (1.0 + z * z * GELU_3C) * GELU_K
        dz = dy * (s + 2.0 * z * s * one_minus_s * du)
    tl.store(DZ + out, dz, mask=mask)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _block(n: int, low: int, high: int) -> int:
    return max(low, min(triton.next_power_of_2(max(n, 1)), high))


def _product(a, b, out_dtype, bias=None, activation=0, z=None):
    """act(a @ b + bias) into a new contiguous [M, N] tensor of out_dtype (z: fp32 pre-activation kept)."""
    m, k = a.shape
    n = b.shape[1]
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if m and n:
        bm, bn, bk = _block(m, 16, 64), _block(n, 16, 64), _block(k, 16, 32)
        precision = "ieee" if torch.float32 in (a.dtype, b.dtype) else "tf32"  # tf32 only matters for fp32
        launch(_matmul, (triton.cdiv(m, bm), triton.cdiv(n, bn)),
            a, b, bias if bias is not None else y, y, z if z is not None else y, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), bias.stride(0) if bias is not None else 0,
            HAS_BIAS=bias is not None, ACTIVATION=activation, STORE_Z=z is not None,
            UPCAST=_interpreting() or a.dtype != b.dtype, PRECISION=precision,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        )
    return y


def check_contract(a, b, bias, activation) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract."""
    require_tensors(("a", a), ("b", b), ("bias", bias))
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D [M, K] and [K, N], got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b must have K = {a.shape[1]} rows (a's columns), got shape {tuple(b.shape)}")
    if bias.shape != (b.shape[1],):
        raise ValueError(f"bias must be [N] = [{b.shape[1]}], got shape {tuple(bias.shape)}")
    require_float("a", a, SUPPORTED_DTYPES)
    require_like("b", b, "a", a)
    require_like("bias", bias, "a", a)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    require_runnable_device(a, "a is")


class MatmulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, bias, activation):
        act = ACTIVATIONS[activation]
        z = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device) if act else None
        y = _product(a, b, a.dtype, bias=bias, activation=act, z=z)
        ctx.save_for_backward(a, b, z)
        ctx.act = act
        CALLS["forward"] += 1
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        a, b, z = ctx.saved_tensors
        m, n = dy.shape
        if ctx.act:
            dz = torch.empty((m, n), dtype=torch.float32, device=dy.device)
            if m and n:
                bm, bn = _block(m, 16, 64), _block(n, 16, 64)
                launch(_activation_grad, (triton.cdiv(m, bm), triton.cdiv(n, bn)),
                    z, dy, dz, m, n, dy.stride(0), dy.stride(1), ACTIVATION=ctx.act, BLOCK_M=bm, BLOCK_N=bn,
                )
        else:
            dz = dy
        da = _product(dz, b.t(), a.dtype)
        db = _product(a.t(), dz, b.dtype)
        ones = torch.ones((1, m), dtype=torch.float32, device=dy.device)
        dbias = _product(ones, dz, a.dtype).reshape(n)
        CALLS["backward"] += 1
        return da, db, dbias, None


@register_kernel(
    "matmul",
    name="triton_matmul",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's tiled Triton matmul with bias + activation epilogue (fp32 accumulator, no TF32, any strides)",
)
def matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str = "none") -> torch.Tensor:
    """act(a @ b + bias) for 2-D a [M, K], b [K, N], bias [N]; activation none, relu or gelu_tanh."""
    check_contract(a, b, bias, activation)
    return MatmulFunction.apply(a, b, bias, activation)
