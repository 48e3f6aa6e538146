"""Scaled dot-product attention in Triton, FlashAttention-2 style, forward and backward.

q [B, Hq, S, D], k and v [B, Hkv, T, D], G = Hq / Hkv (query head h reads key/value head
h // G: grouped-query attention, Hkv = 1 multi-query). With causal, query i sees keys
j <= i + (T - S) (the diagonal aligned to the bottom right, as a query block at the end of a
longer sequence: decoding with S = 1 sees every key); a query that sees no key (S > T) gets
o = 0 and no gradient.

Forward, one program per (block of BLOCK_M queries, batch and query head), a loop over key
blocks of BLOCK_N with the online softmax (per query row: running max m, sum l, accumulator):

    s      = scale * q k_blk^T, masked to -inf              (keys past T, and past the diagonal)
    m_new  = max(m, rowmax(s));   alpha = exp(m - m_new)
    l      = alpha * l + rowsum(exp(s - m_new))
    acc    = alpha * acc + exp(s - m_new) v_blk
    o      = acc / l,   lse = m + log(l)                    (lse: fp32, saved for the backward)

A row that has seen only -inf so far keeps m = -inf; it is shifted by 0 instead, so that
exp(-inf - (-inf)) never makes it NaN. Under causal the loop stops at the block's last
diagonal key. The fp32 o is kept for the backward's Delta.

Backward, one program per (block of BLOCK_N keys, batch and key/value head): it recomputes
p = exp(s - lse) for the G query heads of its group and every query block that sees its keys,

    dv += p^T do;   dp = do v^T;   ds = p (dp - Delta),  Delta_i = do_i . o_i (fp32 o)
    dk += ds^T q;   dq += scale * ds k       (dq: fp32, accumulated with atomics across key blocks)

and dk = scale * dk. Every load is upcast to fp32 before any arithmetic and each tl.dot is
IEEE fp32 (no TF32; also what keeps bf16 right in the Triton interpreter). Every offset is
int64: the batch and head, and the row, key and head-dim indices too (a head-dim or sequence
stride times its index can pass 2^31 on a strided view).

Contract (checked before anything is allocated or launched): q, k, v of one dtype among
fp32/fp16/bf16 on one device (CUDA, or the CPU under TRITON_INTERPRET=1), any strides; q 4-D
[B, Hq, S, D], k and v [B, Hkv, T, D] with Hq a multiple of Hkv and D <= 128; causal a bool,
scale a float. o, dq, dk, dv are contiguous and have q's dtype. An empty input gives an empty
(or, for T = 0, a zero) output. Nondeterministic in dq on a GPU (atomics).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_float, require_like, require_runnable_device, require_tensors
from kernels._launch import launch, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_D = 128
# the inputs, sizes and strides are runtime values: one compile per dtype, causality and head tile, not one
# per layout and size; 32x32 tiles on CUDA (H100, D = 128, ieee dots, forward and backward: 17 s to compile
# against 54 s for 64x64, and 142 against 701 ms at S = T = 4096 in bf16; 2026-12-06, docs/gpu-runs.md run 65)
_STRIDES = tuple(f"stride_{t}{d}" for t in ("q", "k", "v") for d in ("b", "h", "s" if t == "q" else "t", "d"))
RUNTIME_FORWARD = ("Q", "K", "V", "S", "T", "D", "HQ", "G") + _STRIDES
RUNTIME_BACKWARD = ("Q", "K", "V", "DO", "S", "T", "D", "HKV", "G") + _STRIDES + ("stride_dob", "stride_doh", "stride_dos", "stride_dod")
BLOCKS = {"cuda": (32, 32), "cpu": (16, 16)}  # (BLOCK_M, BLOCK_N); the interpreter's small blocks loop more
CALLS = {"forward": 0, "backward": 0}


@triton.jit(**runtime_args(*RUNTIME_FORWARD))
def _attention_forward(
    Q,  # [B, Hq, S, D], strides (stride_qb, stride_qh, stride_qs, stride_qd)
    K,  # [B, Hkv, T, D], strides (stride_kb, stride_kh, stride_kt, stride_kd)
    V,  # [B, Hkv, T, D], strides (stride_vb, stride_vh, stride_vt, stride_vd)
    O,  # [B, Hq, S, D] output in q's dtype, contiguous
    O32,  # [B, Hq, S, D] fp32 copy of the output, contiguous, for the backward's Delta
    LSE,  # [B * Hq, S] fp32 log-sum-exp of each query row (+inf where it sees no key)
    S, T, D, HQ, G,
    scale,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    b = bh // HQ
    h = bh % HQ
    hkv = h // G
    rows = (start_m + tl.arange(0, BLOCK_M)).to(tl.int64)
    dims = tl.arange(0, BLOCK_D).to(tl.int64)
    row_ok = rows < S
    dim_ok = dims < D
    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qs + dims[None, :] * stride_qd,
                mask=row_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)
    k_base = K + b * stride_kb + hkv * stride_kh
    v_base = V + b * stride_vb + hkv * stride_vh
    m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    offset = T - S
    end = T
    if CAUSAL:
        end = tl.minimum(T, start_m + BLOCK_M + offset)
    for start_n in range(0, end, BLOCK_N):
        cols = (start_n + tl.arange(0, BLOCK_N)).to(tl.int64)
        col_ok = cols < T
        kt = tl.load(k_base + cols[None, :] * stride_kt + dims[:, None] * stride_kd,
                     mask=col_ok[None, :] & dim_ok[:, None], other=0.0).to(tl.float32)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        seen = col_ok[None, :] & row_ok[:, None]
        if CAUSAL:
            seen = seen & (cols[None, :] <= rows[:, None] + offset)
        s = tl.where(seen, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - shift)
        p = tl.exp(s - shift[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * stride_vt + dims[None, :] * stride_vd,
                    mask=col_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
    empty = l == 0.0
    denominator = tl.where(empty, 1.0, l)
    o = acc / denominator[:, None]
    out = bh * S * D + rows[:, None] * D + dims[None, :]
    out_mask = row_ok[:, None] & dim_ok[None, :]
    tl.store(O + out, o.to(O.dtype.element_ty), mask=out_mask)
    tl.store(O32 + out, o, mask=out_mask)
    tl.store(LSE + bh * S + rows, tl.where(empty, float("inf"), m + tl.log(denominator)), mask=row_ok)


@triton.jit(**runtime_args(*RUNTIME_BACKWARD))
def _attention_backward(
    Q,  # [B, Hq, S, D], strides (stride_qb, stride_qh, stride_qs, stride_qd)
    K,  # [B, Hkv, T, D], strides (stride_kb, stride_kh, stride_kt, stride_kd)
    V,  # [B, Hkv, T, D], strides (stride_vb, stride_vh, stride_vt, stride_vd)
    DO,  # [B, Hq, S, D] upstream gradient, strides (stride_dob, stride_doh, stride_dos, stride_dod)
    LSE,  # [B * Hq, S] fp32 from the forward
    DELTA,  # [B * Hq, S] fp32, do_i . o_i
    DQ,  # [B, Hq, S, D] fp32, zeroed, contiguous: accumulated with atomics
    DK,  # [B, Hkv, T, D] output in k's dtype, contiguous
    DV,  # [B, Hkv, T, D] output in v's dtype, contiguous
    S, T, D, HKV, G,
    scale,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dos, stride_dod,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    b = bh // HKV
    hkv = bh % HKV
    cols = (start_n + tl.arange(0, BLOCK_N)).to(tl.int64)
    dims = tl.arange(0, BLOCK_D).to(tl.int64)
    col_ok = cols < T
    dim_ok = dims < D
    kv_mask = col_ok[:, None] & dim_ok[None, :]
    k = tl.load(K + b * stride_kb + hkv * stride_kh + cols[:, None] * stride_kt + dims[None, :] * stride_kd,
                mask=kv_mask, other=0.0).to(tl.float32)
    v = tl.load(V + b * stride_vb + hkv * stride_vh + cols[:, None] * stride_vt + dims[None, :] * stride_vd,
                mask=kv_mask, other=0.0).to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    offset = T - S
    first = 0
    if CAUSAL:  # the first query that sees key start_n: i + offset >= start_n
        first = tl.maximum(0, start_n - offset) // BLOCK_M * BLOCK_M
    for g in range(0, G):
        h = hkv * G + g
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = DO + b * stride_dob + h * stride_doh
        row_base = (b * HKV * G + h) * S
        for start_m in range(first, S, BLOCK_M):
            rows = (start_m + tl.arange(0, BLOCK_M)).to(tl.int64)
            row_ok = rows < S
            q_mask = row_ok[:, None] & dim_ok[None, :]
            q = tl.load(q_base + rows[:, None] * stride_qs + dims[None, :] * stride_qd, mask=q_mask,
                        other=0.0).to(tl.float32)
            do = tl.load(do_base + rows[:, None] * stride_dos + dims[None, :] * stride_dod, mask=q_mask,
                         other=0.0).to(tl.float32)
            lse = tl.load(LSE + row_base + rows, mask=row_ok, other=0.0)
            delta = tl.load(DELTA + row_base + rows, mask=row_ok, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            seen = row_ok[:, None] & col_ok[None, :]
            if CAUSAL:
                seen = seen & (cols[None, :] <= rows[:, None] + offset)
            p = tl.where(seen, tl.exp(s - lse[:, None]), 0.0)
            dv += tl.dot(tl.trans(p), do, input_precision="ieee")
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds), q, input_precision="ieee")
            dq = tl.dot(ds, k, input_precision="ieee") * scale
            tl.atomic_add(DQ + row_base * D + rows[:, None] * D + dims[None, :], dq, mask=q_mask)
    out = bh * T * D + cols[:, None] * D + dims[None, :]
    tl.store(DK + out, (dk * scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=kv_mask)


def _blocks(device: torch.device, d: int) -> tuple[int, int, int]:
    block_m, block_n = BLOCKS["cuda" if device.type == "cuda" else "cpu"]
    return block_m, block_n, max(16, triton.next_power_of_2(d))


def check_contract(q, k, v, causal, scale) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract."""
    require_tensors(("q", q), ("k", k), ("v", v))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [B, H, L, D], got shape {tuple(t.shape)}; "
                             "a [B, L, H, D] tensor is passed as its .transpose(1, 2) view")
    require_float("q", q, SUPPORTED_DTYPES)
    require_like("k", k, "q", q)
    require_like("v", v, "q", q)
    require_runnable_device(q, "q is")
    b, hq, _, d = q.shape
    if tuple(k.shape) != tuple(v.shape) or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k and v must be [B, Hkv, T, D] = [{b}, Hkv, T, {d}] like q [B, Hq, S, D] = {tuple(q.shape)}, "
                         f"got k {tuple(k.shape)} and v {tuple(v.shape)}")
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"Hq = {hq} query heads must be a multiple of Hkv = {hkv} key/value heads (grouped-query "
                         "attention); repeat the key/value heads or pick a divisor")
    if d > MAX_D:
        raise ValueError(f"head dim D = {d} is above {MAX_D}, the largest this kernel tiles; split the heads")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float (e.g. 1 / sqrt(D)), got {type(scale).__name__}")


def _forward(q, k, v, causal: bool, scale: float):
    b, hq, s, d = q.shape
    hkv, t = k.shape[1], k.shape[2]
    o = torch.zeros((b, hq, s, d), dtype=q.dtype, device=q.device)
    o32 = torch.zeros((b, hq, s, d), dtype=torch.float32, device=q.device)
    lse = torch.full((b * hq, s), float("inf"), dtype=torch.float32, device=q.device)
    if o.numel() and t:
        block_m, block_n, block_d = _blocks(q.device, d)
        launch(_attention_forward, (triton.cdiv(s, block_m), b * hq),
               q, k, v, o, o32, lse, s, t, d, hq, hq // hkv, float(scale),
               *q.stride(), *k.stride(), *v.stride(),
               CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=4)
    return o, o32, lse


def _backward(q, k, v, o32, lse, do, causal: bool, scale: float):
    b, hq, s, d = q.shape
    hkv, t = k.shape[1], k.shape[2]
    if tuple(do.shape) != (b, hq, s, d) or do.device != q.device:
        raise ValueError(f"do must have shape {(b, hq, s, d)} on {q.device}, got {tuple(do.shape)} on {do.device}")
    dq32 = torch.zeros((b, hq, s, d), dtype=torch.float32, device=q.device)
    dk = torch.zeros((b, hkv, t, d), dtype=k.dtype, device=q.device)
    dv = torch.zeros((b, hkv, t, d), dtype=v.dtype, device=q.device)
    if dq32.numel() and dk.numel():
        delta = (do.to(torch.float32) * o32).sum(-1).reshape(b * hq, s).contiguous()
        block_m, block_n, block_d = _blocks(q.device, d)
        launch(_attention_backward, (triton.cdiv(t, block_n), b * hkv),
               q, k, v, do, lse, delta, dq32, dk, dv, s, t, d, hkv, hq // hkv, float(scale),
               *q.stride(), *k.stride(), *v.stride(), *do.stride(),
               CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=4)
    return dq32.to(q.dtype), dk, dv


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        o, o32, lse = _forward(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, o32, lse)
        ctx.causal, ctx.scale = causal, scale
        CALLS["forward"] += 1
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, k, v, o32, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o32, lse, do, ctx.causal, ctx.scale)
        CALLS["backward"] += 1
        return dq, dk, dv, None, None


@register_kernel(
    "attention",
    name="triton_attention",
    contract=Contract(dtypes=SUPPORTED_DTYPES, deterministic=False),
    description="the project's Triton FlashAttention-2 style attention (online softmax, causal aligned to the "
                "bottom right, GQA/MQA, any strides; dq by atomics)",
)
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    """o = softmax(scale * q k^T, masked) v per head; scale defaults to 1 / sqrt(D)."""
    if scale is None and isinstance(q, torch.Tensor):
        scale = q.shape[-1] ** -0.5
    check_contract(q, k, v, causal, scale)
    return AttentionFunction.apply(q, k, v, causal, scale)
