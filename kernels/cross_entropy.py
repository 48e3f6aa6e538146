"""Cross-entropy over logits in Triton, forward and backward, with torch's semantics.

    m_i    = max_j x[i, j]
    s_i    = sum_j exp(x[i, j] - m_i)            m and s: one fp32 value each per row, saved
    loss_i = log(s_i) + (m_i - x[i, t_i])        for rows with t_i != ignore_index
    loss   = sum of loss_i over valid rows / n_valid     NaN when n_valid == 0, like torch

loss_i is log(s) + (m - x_t), never (m + log(s)) - x_t: on rows of large values (fp32 at
-1e9 has an ulp of 64) m + log(s) rounds log(s) away. For the same reason the backward
recomputes p from m and s rather than from a saved logsumexp.

Backward, with upstream gradient u of the scalar loss and p = exp(x - m) / s per row:

    dx[i, j] = u / n_valid * (p[i, j] - [j == t_i])     valid rows
    dx[i, j] = 0 * (...)                                ignored rows: 0, NaN where the row holds inf/NaN (as torch)

Layout of the work: one program per ROWS rows (several where rows are narrow:
kernels._launch.rows_per_program), passes over [ROWS, BLOCK] tiles with BLOCK =
min(next_power_of_2(V), MAX_BLOCK), so any V works; the mean is one program looping over
the rows (a fixed order: the loss is deterministic), which also counts n_valid for the
backward. Every load is upcast to fp32 before any arithmetic (this is also what keeps bf16
right in the Triton interpreter). Row offsets are int64 (row * stride can pass 2^31).

Contract (checked before anything is allocated or launched): logits [N, V] of fp32/fp16/bf16
with V >= 1, any strides; target [N] int64 on the same device, every entry in [0, V) or equal
to ignore_index; ignore_index an int. The loss is a 0-d tensor in logits' dtype; dlogits is
contiguous in logits' dtype.
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_runnable_device, require_tensors
from kernels._launch import launch, rows_per_program, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 4096
MEAN_BLOCK = 256  # rows per step of the mean's loop: small enough that the interpreter's cases (at most 320 rows) take more than one step
CALLS = {"forward": 0, "backward": 0}


@triton.jit(**runtime_args("n_rows", "stride_t", "ignore_index"))
def _cross_entropy_forward(
    X,  # [N, V] logits, strides (stride_xm, stride_xn)
    T,  # [N] int64 targets, stride stride_t
    LOSS,  # [N] fp32, loss of each row (0 on ignored rows)
    MAX,  # [N] fp32, max of each row, for the backward
    SUM,  # [N] fp32, sum of exp(x - max) of each row, for the backward
    n_rows,  # N, the rows of logits
    V,
    stride_xm,
    stride_xn,
    stride_t,
    ignore_index,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles, one reduction per row
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < n_rows
    x_row = X + row * stride_xm
    # a padding row (row >= n_rows) reads as ignored: nothing of it is loaded past its mask or stored
    t = tl.load(T + row * stride_t, mask=in_rows, other=ignore_index)
    valid = t != ignore_index
    m_acc = tl.full([ROWS, BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < V), other=float("-inf")).to(tl.float32)
        m_acc = tl.maximum(m_acc, x)
    m = tl.max(m_acc, axis=1)[:, None]
    s_acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < V), other=float("-inf")).to(tl.float32)
        s_acc += tl.exp(x - m)
    s = tl.sum(s_acc, axis=1)[:, None]
    # an ignored row's target may be any value (-100): its load is masked off and its loss dropped
    x_t = tl.load(x_row + t * stride_xn, mask=valid, other=0.0).to(tl.float32)
    loss = tl.log(s) + (m - x_t)
    tl.store(LOSS + row, tl.where(valid, loss, 0.0), mask=in_rows)
    tl.store(MAX + row, m, mask=in_rows)
    tl.store(SUM + row, s, mask=in_rows)


@triton.jit(**runtime_args("N", "stride_t", "ignore_index"))
def _cross_entropy_mean(
    LOSS,  # [N] fp32 from the forward
    T,  # [N] int64 targets, stride stride_t
    OUT,  # [] the mean loss, in logits' dtype
    COUNT,  # [1] int32, n_valid, for the backward
    N,
    stride_t,
    ignore_index,
    BLOCK: tl.constexpr,
):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, N, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        mask = rows < N
        t = tl.load(T + rows.to(tl.int64) * stride_t, mask=mask, other=0)
        valid = mask & (t != ignore_index)
        acc += tl.load(LOSS + rows, mask=valid, other=0.0)
        count += valid.to(tl.int32)
    n_valid = tl.sum(count, axis=0)
    # 0 / 0 is NaN when every row is ignored, as in torch
    tl.store(OUT, (tl.sum(acc, axis=0) / n_valid.to(tl.float32)).to(OUT.dtype.element_ty))
    tl.store(COUNT, n_valid)


@triton.jit(**runtime_args("n_rows", "stride_t", "ignore_index"))
def _cross_entropy_backward(
    X,  # [N, V] logits, strides (stride_xm, stride_xn)
    T,  # [N] int64 targets, stride stride_t
    MAX,  # [N] fp32 from the forward
    SUM,  # [N] fp32 from the forward
    COUNT,  # [1] int32, n_valid, from the forward
    DLOSS,  # [] upstream gradient of the scalar loss
    DX,  # [N, V] output, contiguous
    n_rows,  # N, the rows of logits
    V,
    stride_xm,
    stride_xn,
    stride_t,
    ignore_index,
    ROWS: tl.constexpr,  # rows per program: [ROWS, BLOCK] tiles
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1]
    in_rows = row < n_rows
    x_row = X + row * stride_xm
    t = tl.load(T + row * stride_t, mask=in_rows, other=ignore_index)
    valid = t != ignore_index
    m = tl.load(MAX + row, mask=in_rows)
    s = tl.load(SUM + row, mask=in_rows)
    n_valid = tl.load(COUNT).to(tl.float32)
    scale = tl.load(DLOSS).to(tl.float32) / tl.maximum(n_valid, 1.0)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < V)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        p = tl.exp(x - m) / s
        dx = scale * (p - tl.where(cols == t, 1.0, 0.0))
        # a product, not a select: an ignored row that holds inf/NaN gets NaN, as torch's 0 * NaN does
        tl.store(DX + row * V + cols, (dx * tl.where(valid, 1.0, 0.0)).to(DX.dtype.element_ty), mask=mask)


def _block(v: int) -> int:
    return min(triton.next_power_of_2(v), MAX_BLOCK)


def _num_warps(block: int) -> int:
    return 4 if block <= 1024 else 8


def check_contract(logits: torch.Tensor, target: torch.Tensor, ignore_index: int) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract.

    Checking the target range reads target back to the host once: an out-of-range target
    would otherwise make the kernel read a logit outside its row."""
    require_tensors(("logits", logits), ("target", target))
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D [N, V], got shape {tuple(logits.shape)}; reshape it to (-1, V) first")
    n, v = logits.shape
    if v < 1:
        raise ValueError(f"V = {v}: logits need at least one class")
    if logits.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"logits have dtype {logits.dtype}; this kernel supports float32, float16 and bfloat16: cast them first")
    if target.dim() != 1 or target.shape[0] != n:
        raise ValueError(f"target must have shape ({n},) to match logits' rows, got {tuple(target.shape)}")
    if target.dtype != torch.int64:
        raise TypeError(f"target has dtype {target.dtype}; cast it to torch.int64 (class indices)")
    if target.device != logits.device:
        raise ValueError(f"logits are on {logits.device} but target on {target.device}; move both to one device")
    require_runnable_device(logits, "logits are")
    if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}; torch's default is -100")
    bad = (target != ignore_index) & ((target < 0) | (target >= v))
    if n and bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"target[{row}] = {int(target[row])} is outside [0, {v}) and not ignore_index ({ignore_index}); "
            "fix the labels or mark the row with ignore_index"
        )


def _forward(logits, target, ignore_index):
    n, v = logits.shape
    device = logits.device
    loss = torch.empty((), dtype=logits.dtype, device=device)
    row_loss = torch.empty(n, dtype=torch.float32, device=device)
    row_max = torch.empty(n, dtype=torch.float32, device=device)
    row_sum = torch.empty(n, dtype=torch.float32, device=device)
    count = torch.empty(1, dtype=torch.int32, device=device)
    if n:
        block = _block(v)
        rows = rows_per_program(n, block, device)
        launch(_cross_entropy_forward, (triton.cdiv(n, rows),),
            logits, target, row_loss, row_max, row_sum, n, v,
            logits.stride(0), logits.stride(1), target.stride(0), ignore_index,
            ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
        )
    launch(_cross_entropy_mean, (1,),
        row_loss, target, loss, count, n, target.stride(0), ignore_index, BLOCK=MEAN_BLOCK
    )
    return loss, row_max, row_sum, count


def _backward(logits, target, row_max, row_sum, count, dloss, ignore_index):
    n, v = logits.shape
    if dloss.numel() != 1 or dloss.device != logits.device:
        raise ValueError(f"the upstream gradient must be one value on {logits.device}, got shape {tuple(dloss.shape)} on {dloss.device}")
    dx = torch.empty((n, v), dtype=logits.dtype, device=logits.device)
    if n:
        block = _block(v)
        rows = rows_per_program(n, block, logits.device)
        launch(_cross_entropy_backward, (triton.cdiv(n, rows),),
            logits, target, row_max, row_sum, count, dloss, dx, n, v,
            logits.stride(0), logits.stride(1), target.stride(0), ignore_index,
            ROWS=rows, BLOCK=block, num_warps=_num_warps(block),
        )
    return dx


class CrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index):
        loss, row_max, row_sum, count = _forward(logits, target, ignore_index)
        ctx.save_for_backward(logits, target, row_max, row_sum, count)
        ctx.ignore_index = ignore_index
        ctx.mark_non_differentiable(target)
        CALLS["forward"] += 1
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, dloss):
        logits, target, row_max, row_sum, count = ctx.saved_tensors
        dx = _backward(logits, target, row_max, row_sum, count, dloss, ctx.ignore_index)
        CALLS["backward"] += 1
        return dx, None, None


@register_kernel(
    "cross_entropy",
    name="triton_cross_entropy",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's Triton cross-entropy (mean over non-ignored rows, ignore_index)",
)
def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of logits [N, V] against int64 targets [N], rows equal to
    ignore_index left out (torch.nn.functional.cross_entropy's default reduction)."""
    check_contract(logits, target, ignore_index)
    return CrossEntropyFunction.apply(logits, target, ignore_index)
