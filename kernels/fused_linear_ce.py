"""Fused linear + cross-entropy in Triton: the N x V logits are never materialised whole.

    z[i, j] = x[i] . w[j]                         x [N, D], w [V, D], fp32 accumulation
    loss    = sum over valid i of (lse_i - z[i, t_i]) / n_valid     valid: t_i != ignore_index
              (n_valid == 0 gives 0 / 0 = NaN, as torch does)

Backward, with u the upstream gradient of the scalar loss and s = u / max(n_valid, 1):

    G[i, j] = (exp(z[i, j] - lse_i) - [j == t_i]) on valid rows, 0 on ignored rows
    dx      = s * G @ w         dw = s * G^T @ x

Forward (``_lse_partials``): programs own a block of rows and a split of the vocabulary; each
runs an online softmax over its vocabulary tiles (running max m, running sum of exp(z - m))
and picks the target logit out of the tile that holds it. A few splits per row block keep
the GPU busy when N is small; their (m, sum, target) partials are merged on the host in fp32.
Extra memory: O(N * splits).

Backward, chunked along N (the tutorial's "production path"): for a chunk of C rows,
``_dlogits`` recomputes the logits tile by tile (tl.dot over D) and writes G [C, V] (in the
input dtype, unscaled so fp16 does not underflow); then ``_scaled_matmul`` computes
dx[chunk] = s * G @ w (each program owns a tile of dx rows: no atomics) and
dw (+)= s * G^T @ x[chunk] (each program owns a tile of dw and sums over the chunk's rows in
fp32: no atomics, one read-modify-write per chunk). C is chosen so that C * V stays about the
size of x and the G buffer under G_BUFFER_BYTES, whatever N is.

dw accumulates in an fp32 buffer while that costs at most FP32_DW_BYTES (always for fp32
weights); beyond, it accumulates in the weight's dtype, one rounding per chunk (as
Liger-Kernel does), so that at N=16384, D=4096, V=128256 bf16 the extra memory is dw (1.05 GB)
+ dx (0.13 GB) + G (0.13 GB), about 1.3 GB.

tl.dot runs on the input dtype on the GPU (fp32 inputs with input_precision="ieee": no TF32);
under the Triton interpreter the operands are upcast to fp32 first, because the interpreter
cannot do bf16 arithmetic.

Contract (checked before anything is allocated): x [N, D] and weight [V, D] of one dtype
among fp32/fp16/bf16, target [N] int64 with values in [0, V) or equal to ignore_index (an int),
one device, any strides, N, V >= 1, 1 <= D <= MAX_D.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._launch import runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_D = 65536
# G = softmax - onehot is kept in the input dtype, which only the gradients read: the loss is held
# to the op's model for fp32 intermediates (fp32 logits and log-sum-exp)
G_IN_INPUT_DTYPE = {"dx": "input", "dweight": "input"}
G_BUFFER_BYTES = 128 * 2**20
FP32_DW_BYTES = 256 * 2**20
CALLS = {"forward": 0, "backward": 0}


@triton.jit
def _logits_tile(
    X,  # [N, D] input, strides (stride_xn, stride_xd)
    W,  # [V, D] weight, strides (stride_wv, stride_wd)
    rows,  # [BLOCK_N] row indices into X
    cols,  # [BLOCK_V] vocabulary indices into W
    N,
    V,
    D,
    stride_xn,
    stride_xd,
    stride_wv,
    stride_wd,
    BLOCK_N: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """z[rows, cols] in fp32; rows >= N and cols >= V give 0."""
    acc = tl.zeros([BLOCK_N, BLOCK_V], dtype=tl.float32)
    row_off = rows.to(tl.int64)[:, None] * stride_xn
    col_off = cols.to(tl.int64)[None, :] * stride_wv
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_off = ds.to(tl.int64)
        x = tl.load(
            X + row_off + d_off[None, :] * stride_xd, mask=(rows[:, None] < N) & (ds[None, :] < D), other=0.0
        )
        wt = tl.load(
            W + col_off + d_off[:, None] * stride_wd, mask=(cols[None, :] < V) & (ds[:, None] < D), other=0.0
        )
        if UPCAST:
            x = x.to(tl.float32)
            wt = wt.to(tl.float32)
        acc = tl.dot(x, wt, acc, input_precision=PRECISION)
    return acc


@triton.jit(**runtime_args("N", "V", "stride_t", "tiles_per_split"))
def _lse_partials(
    X,  # [N, D] input, strides (stride_xn, stride_xd)
    W,  # [V, D] weight, strides (stride_wv, stride_wd)
    T,  # [N] int64 targets, stride stride_t
    M_OUT,  # [splits, N] fp32 running max of each split
    S_OUT,  # [splits, N] fp32 sum of exp(z - max) of each split
    TGT_OUT,  # [splits, N] fp32 target logit if the split holds it, else 0
    N,
    V,
    D,
    stride_xn,
    stride_xd,
    stride_wv,
    stride_wd,
    stride_t,
    tiles_per_split,
    BLOCK_N: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    t = tl.load(T + rows.to(tl.int64) * stride_t, mask=row_ok, other=-1)
    m = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_N], dtype=tl.float32)
    tgt = tl.zeros([BLOCK_N], dtype=tl.float32)
    v_first = split * tiles_per_split * BLOCK_V
    v_last = tl.minimum(v_first + tiles_per_split * BLOCK_V, V)
    for v0 in range(v_first, v_last, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        z = _logits_tile(
            X, W, rows, cols, N, V, D, stride_xn, stride_xd, stride_wv, stride_wd,
            BLOCK_N, BLOCK_V, BLOCK_D, UPCAST, PRECISION,
        )
        col_ok = (cols < V)[None, :] & (rows >= 0)[:, None]
        z = tl.where(col_ok, z, float("-inf"))
        m_new = tl.maximum(m, tl.max(z, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new[:, None]), axis=1)
        m = m_new
        hit = col_ok & (cols[None, :] == t[:, None])
        tgt += tl.sum(tl.where(hit, z, 0.0), axis=1)
    out = split.to(tl.int64) * N + rows
    tl.store(M_OUT + out, m, mask=row_ok)
    tl.store(S_OUT + out, s, mask=row_ok)
    tl.store(TGT_OUT + out, tgt, mask=row_ok)


@triton.jit(**runtime_args("C", "stride_t", "ignore_index"))
def _dlogits(
    X,  # [C, D] the chunk's rows of x, strides (stride_xn, stride_xd)
    W,  # [V, D] weight, strides (stride_wv, stride_wd)
    T,  # [C] int64 targets of the chunk, stride stride_t
    LSE,  # [C] fp32 log-sum-exp of the chunk's rows, contiguous
    G,  # [C, V] output softmax - onehot (0 on ignored rows), row stride stride_gn
    C,
    V,
    D,
    stride_xn,
    stride_xd,
    stride_wv,
    stride_wd,
    stride_t,
    stride_gn,
    ignore_index,
    BLOCK_N: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    row_ok = rows < C
    z = _logits_tile(
        X, W, rows, cols, C, V, D, stride_xn, stride_xd, stride_wv, stride_wd,
        BLOCK_N, BLOCK_V, BLOCK_D, UPCAST, PRECISION,
    )
    t = tl.load(T + rows.to(tl.int64) * stride_t, mask=row_ok, other=ignore_index)
    lse = tl.load(LSE + rows, mask=row_ok, other=0.0)
    valid = row_ok & (t != ignore_index)
    p = tl.exp(z - lse[:, None])
    g = p - tl.where(cols[None, :] == t[:, None], 1.0, 0.0)
    inside = (rows[:, None] < C) & (cols[None, :] < V)
    g = tl.where(inside & valid[:, None], g, 0.0)
    tl.store(G + rows.to(tl.int64)[:, None] * stride_gn + cols[None, :], g.to(G.dtype.element_ty), mask=inside)


@triton.jit
def _scaled_matmul(
    A,  # [M, K], strides (stride_am, stride_ak)
    B,  # [K, N], strides (stride_bk, stride_bn)
    OUT,  # [M, N], strides (stride_om, stride_on); OUT = (OUT if ACCUMULATE) + scale * A @ B
    SCALE,  # [1] fp32 scale (upstream / n_valid)
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    stride_on,
    ACCUMULATE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    a_off = rm.to(tl.int64)[:, None] * stride_am
    b_off = rn.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(A + a_off + rk.to(tl.int64)[None, :] * stride_ak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(B + rk.to(tl.int64)[:, None] * stride_bk + b_off, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    acc = acc * tl.load(SCALE)
    out_ptrs = OUT + rm.to(tl.int64)[:, None] * stride_om + rn.to(tl.int64)[None, :] * stride_on
    out_mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ACCUMULATE:
        acc += tl.load(out_ptrs, mask=out_mask, other=0.0).to(tl.float32)
    tl.store(out_ptrs, acc.to(OUT.dtype.element_ty), mask=out_mask)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _config(dtype: torch.dtype) -> dict:
    """Tile sizes and dot precision. fp32 tiles are smaller (ieee fp32 dots need more registers),
    and so are all tiles in the interpreter, whose cost grows with the tile (bf16 casts there
    are emulated element by element)."""
    if dtype == torch.float32 or _interpreting():
        precision = "ieee" if dtype == torch.float32 else "tf32"
        return dict(BLOCK_N=64, BLOCK_V=64, BLOCK_D=32, UPCAST=_interpreting(), PRECISION=precision, num_warps=4, num_stages=3)
    return dict(BLOCK_N=128, BLOCK_V=128, BLOCK_D=64, UPCAST=False, PRECISION="tf32", num_warps=8, num_stages=3)


def _multiprocessors(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter runs programs one after another; a few splits still exercise the merge


def _chunk_rows(n: int, v: int, d: int, elem: int) -> int:
    """Rows per backward chunk: G [C, V] about as large as x (Liger-Kernel's rule), capped by
    G_BUFFER_BYTES, at least 16 (the smallest tl.dot tile)."""
    rows = triton.next_power_of_2(triton.cdiv(n, triton.cdiv(v, d)))
    cap = max(16, G_BUFFER_BYTES // (v * elem))
    cap = 1 << (cap.bit_length() - 1)
    return max(16, min(rows, cap))


def check_contract(x, weight, target, ignore_index) -> None:
    """Raise before anything is allocated or written if the inputs are outside the contract."""
    for name, t in (("x", x), ("weight", weight), ("target", target)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [N, D], got shape {tuple(x.shape)}; reshape it to (-1, D) first")
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [V, D], got shape {tuple(weight.shape)}")
    n, d = x.shape
    v = weight.shape[0]
    if weight.shape[1] != d:
        raise ValueError(f"weight has shape {tuple(weight.shape)} but x has D = {d}; weight must be [V, {d}]")
    if target.dim() != 1 or target.shape[0] != n:
        raise ValueError(f"target must have shape ({n},) to match x's rows, got {tuple(target.shape)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; this kernel supports float32, float16 and bfloat16: cast x first")
    if weight.dtype != x.dtype:
        raise TypeError(f"weight has dtype {weight.dtype} but x has {x.dtype}; cast weight to {x.dtype}")
    if target.dtype != torch.int64:
        raise TypeError(f"target has dtype {target.dtype}; class indices must be int64: use target.long()")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}; the usual value is -100")
    if not (x.device == weight.device == target.device):
        raise ValueError(
            f"x is on {x.device}, weight on {weight.device}, target on {target.device}; move all three to one device"
        )
    if x.device.type != "cuda" and not (_interpreting() and x.device.type == "cpu"):
        raise ValueError(f"x is on {x.device}: run on a CUDA device, or on the CPU with TRITON_INTERPRET=1")
    if n < 1 or v < 1:
        raise ValueError(f"N = {n} rows and V = {v} classes: both must be >= 1")
    if not 1 <= d <= MAX_D:
        raise ValueError(f"D = {d} is outside 1..{MAX_D}; split the hidden dimension or raise MAX_D")
    bad = (target != ignore_index) & ((target < 0) | (target >= v))
    if bool(bad.any()):
        first = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"target[{first}] = {int(target[first])} is not a class in [0, {v}) nor ignore_index = {ignore_index}; "
            "fix the labels or pass the ignore_index they use"
        )


def _forward(x, weight, target, ignore_index):
    n, d = x.shape
    v = weight.shape[0]
    cfg = _config(x.dtype)
    row_blocks = triton.cdiv(n, cfg["BLOCK_N"])
    v_tiles = triton.cdiv(v, cfg["BLOCK_V"])
    wanted = max(1, min(v_tiles, triton.cdiv(2 * _multiprocessors(x.device), row_blocks)))
    tiles_per_split = triton.cdiv(v_tiles, wanted)
    splits = triton.cdiv(v_tiles, tiles_per_split)
    part = torch.empty((3, splits, n), dtype=torch.float32, device=x.device)
    _lse_partials[(row_blocks, splits)](
        x, weight, target, part[0], part[1], part[2], n, v, d,
        x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), target.stride(0), tiles_per_split, **cfg,
    )
    m, s, tgt = part
    top = m.max(0).values
    lse = top + torch.log((s * torch.exp(m - top)).sum(0))
    valid = target != ignore_index
    n_valid = valid.sum()
    rows_loss = torch.where(valid, lse - tgt.sum(0), torch.zeros_like(lse))
    loss = rows_loss.sum() / n_valid
    return loss.to(x.dtype), lse, n_valid


def _backward(x, weight, target, lse, n_valid, ignore_index, upstream, need_dx=True, need_dw=True):
    n, d = x.shape
    v = weight.shape[0]
    cfg = _config(x.dtype)
    mm = dict(
        BLOCK_M=cfg["BLOCK_N"], BLOCK_N=cfg["BLOCK_V"], BLOCK_K=cfg["BLOCK_D"], UPCAST=cfg["UPCAST"],
        PRECISION=cfg["PRECISION"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    scale = (upstream.to(torch.float32) / n_valid.clamp(min=1).to(torch.float32)).reshape(1)
    dx = torch.empty((n, d), dtype=x.dtype, device=x.device) if need_dx else None
    dw = None
    if need_dw:
        fp32_acc = weight.dtype == torch.float32 or v * d * 4 <= FP32_DW_BYTES
        dw = torch.empty((v, d), dtype=torch.float32 if fp32_acc else weight.dtype, device=x.device)
    chunk = min(n, _chunk_rows(n, v, d, x.element_size()))
    g = torch.empty((chunk, v), dtype=x.dtype, device=x.device)
    for r0 in range(0, n, chunk):
        c = min(chunk, n - r0)
        xc, tc, gc = x[r0 : r0 + c], target[r0 : r0 + c], g[:c]
        _dlogits[(triton.cdiv(c, cfg["BLOCK_N"]), triton.cdiv(v, cfg["BLOCK_V"]))](
            xc, weight, tc, lse[r0 : r0 + c], gc, c, v, d,
            x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), target.stride(0), gc.stride(0),
            ignore_index, **cfg,
        )
        if need_dx:
            dxc = dx[r0 : r0 + c]
            _scaled_matmul[(triton.cdiv(c, mm["BLOCK_M"]), triton.cdiv(d, mm["BLOCK_N"]))](
                gc, weight, dxc, scale, c, d, v,
                gc.stride(0), gc.stride(1), weight.stride(0), weight.stride(1), dxc.stride(0), dxc.stride(1),
                ACCUMULATE=False, **mm,
            )
        if need_dw:
            _scaled_matmul[(triton.cdiv(v, mm["BLOCK_M"]), triton.cdiv(d, mm["BLOCK_N"]))](
                gc, xc, dw, scale, v, d, c,
                gc.stride(1), gc.stride(0), xc.stride(0), xc.stride(1), dw.stride(0), dw.stride(1),
                ACCUMULATE=r0 > 0, **mm,
            )
    if dw is not None and dw.dtype != weight.dtype:
        dw = dw.to(weight.dtype)
    return dx, dw


class FusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, target, ignore_index):
        loss, lse, n_valid = _forward(x, weight, target, ignore_index)
        ctx.save_for_backward(x, weight, target, lse, n_valid)
        ctx.ignore_index = ignore_index
        CALLS["forward"] += 1
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, upstream):
        x, weight, target, lse, n_valid = ctx.saved_tensors
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dx, dw = _backward(x, weight, target, lse, n_valid, ctx.ignore_index, upstream, need_dx, need_dw)
        CALLS["backward"] += 1
        return dx, dw, None, None


@register_kernel(
    "fused_linear_cross_entropy",
    name="triton_flce",
    contract=Contract(dtypes=SUPPORTED_DTYPES, max_n=MAX_D, precision=G_IN_INPUT_DTYPE),
    description="the project's Triton fused linear + cross-entropy (online softmax, N-chunked backward, no atomics)",
)
def fused_linear_cross_entropy(
    x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """cross_entropy(x @ weight.T, target, ignore_index=ignore_index), mean over non-ignored rows."""
    check_contract(x, weight, target, ignore_index)
    return FusedLinearCrossEntropyFunction.apply(x, weight, target, ignore_index)
