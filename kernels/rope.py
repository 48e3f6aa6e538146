"""Rotary position embedding (RoPE) in Triton, forward and backward.

Pair i of row (b, s, h) of x[B, S, H, D] is (x1, x2) = (x[b, s, h, i], x[b, s, h, i + R]) in
the half-split convention (GPT-NeoX, Llama) or (x[b, s, h, 2i], x[b, s, h, 2i + 1]) interleaved
(GPT-J), R = D / 2; its angle is that of position p = offset + s:

    y1 = x1 * cos[p, i] - x2 * sin[p, i]
    y2 = x2 * cos[p, i] + x1 * sin[p, i]

Backward: the map is linear in x and its transpose is the rotation by -theta, so the same kernel
rotates dy with the sine negated (SIGN = -1); cos and sin get no gradient.

Layout of the work: the B * S * H rows of x flattened, a 2-D grid of [ROWS, BLOCK_R] tiles of
pairs (rows on the first axis, which has no 65535 limit on a GPU); each row's (b, s, h) is
recovered from its flat index, so every stride of x, of the tables and of dy is honoured. Loads
are upcast to fp32 before any arithmetic (this also keeps bf16 right in the Triton interpreter);
offsets are int64 (b * stride can pass 2^31 on large tensors).

Contract (checked before anything is allocated or launched): x [B, S, H, D] of fp32/fp16/bf16
with D even, cos and sin [P, D / 2] of a float dtype (fp32/fp16/bf16, either may differ from
x's) with P >= offset + S, 0 <= offset, all on one device, any strides. y and dx are contiguous
and have x's dtype. An empty x gives an empty y.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from harness import Contract, register_kernel
from kernels._contract import require_float, require_runnable_device, require_tensors
from kernels._launch import launch, runtime_args

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 128  # pairs per row of a tile
TILE = 4096  # pairs per program
CALLS = {"forward": 0, "backward": 0}


# the input, sizes, offset and strides are runtime values: one compile per dtype, direction, convention
# and tile, not one per layout, size and offset
@triton.jit(**runtime_args("X", "COS", "SIN", "n_rows", "S", "H", "R", "offset", "stride_xb", "stride_xs", "stride_xh",
                           "stride_xd", "stride_cp", "stride_cr", "stride_sp", "stride_sr"))
def _rope_rotate(
    X,  # [B, S, H, D] input (x, or dy for the backward), strides (stride_xb, stride_xs, stride_xh, stride_xd)
    COS,  # [P, R] table, strides (stride_cp, stride_cr)
    SIN,  # [P, R] table, strides (stride_sp, stride_sr)
    Y,  # [B, S, H, D] output, contiguous
    n_rows,  # B * S * H
    S,
    H,
    R,
    offset,
    stride_xb,
    stride_xs,
    stride_xh,
    stride_xd,
    stride_cp,
    stride_cr,
    stride_sp,
    stride_sr,
    SIGN: tl.constexpr,  # 1: rotate by theta (forward), -1: by -theta (backward)
    INTERLEAVED: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    pairs = (tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    mask = (rows < n_rows)[:, None] & (pairs < R)[None, :]
    h = rows % H
    s = (rows // H) % S
    b = rows // (H * S)
    if INTERLEAVED:
        col1 = 2 * pairs
        col2 = col1 + 1
    else:
        col1 = pairs
        col2 = pairs + R
    x_row = X + (b * stride_xb + s * stride_xs + h * stride_xh)[:, None]
    x1 = tl.load(x_row + col1[None, :] * stride_xd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + col2[None, :] * stride_xd, mask=mask, other=0.0).to(tl.float32)
    pos = (s + offset)[:, None]
    c = tl.load(COS + pos * stride_cp + pairs[None, :] * stride_cr, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(SIN + pos * stride_sp + pairs[None, :] * stride_sr, mask=mask, other=0.0).to(tl.float32) * SIGN
    y_row = Y + (rows * (2 * R))[:, None]
    tl.store(y_row + col1[None, :], (x1 * c - x2 * sn).to(Y.dtype.element_ty), mask=mask)
    tl.store(y_row + col2[None, :], (x2 * c + x1 * sn).to(Y.dtype.element_ty), mask=mask)


def _tile(r: int) -> tuple[int, int]:
    """(ROWS, BLOCK_R): TILE pairs per program, whole rows when R is small."""
    block_r = min(triton.next_power_of_2(r), MAX_BLOCK)
    return max(1, TILE // block_r), block_r


def check_contract(x, cos, sin, offset, interleaved) -> None:
    """Raise before anything is allocated or launched if the inputs are outside the contract."""
    require_tensors(("x", x), ("cos", cos), ("sin", sin))
    if x.dim() != 4:
        raise ValueError(f"x must be 4-D [B, S, H, D], got shape {tuple(x.shape)}; add the missing dims with unsqueeze")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x's last dim D = {d} must be even: RoPE rotates pairs")
    require_float("x", x, SUPPORTED_DTYPES)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an int >= 0 (the position of x[:, 0]), got {offset!r}")
    for name, t in (("cos", cos), ("sin", sin)):
        require_float(name, t, SUPPORTED_DTYPES)
        if t.dim() != 2 or t.shape[1] != d // 2:
            raise ValueError(f"{name} must be [P, D/2] = [P, {d // 2}], got shape {tuple(t.shape)}")
        if t.shape[0] < offset + x.shape[1]:
            raise ValueError(f"{name} has {t.shape[0]} positions but offset + S = {offset} + {x.shape[1]} are read; "
                             f"pass a table of at least {offset + x.shape[1]} rows")
        if t.device != x.device:
            raise ValueError(f"x is on {x.device} but {name} on {t.device}; move both to one device")
    require_runnable_device(x, "x is")


def _rotate(x, cos, sin, offset, interleaved, sign):
    b, s, h, d = x.shape
    y = torch.empty((b, s, h, d), dtype=x.dtype, device=x.device)
    n_rows, r = b * s * h, d // 2
    if n_rows and r:
        rows, block_r = _tile(r)
        grid = (triton.cdiv(n_rows, rows), triton.cdiv(r, block_r))
        launch(_rope_rotate, grid,
            x, cos, sin, y, n_rows, s, h, r, offset, *x.stride(), *cos.stride(), *sin.stride(),
            SIGN=sign, INTERLEAVED=bool(interleaved), ROWS=rows, BLOCK_R=block_r,
        )
    return y


class RoPEFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, offset, interleaved):
        ctx.save_for_backward(cos, sin)
        ctx.offset, ctx.interleaved = offset, interleaved
        CALLS["forward"] += 1
        return _rotate(x, cos, sin, offset, interleaved, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        dx = _rotate(dy, cos, sin, ctx.offset, ctx.interleaved, -1)
        CALLS["backward"] += 1
        return dx, None, None, None, None


@register_kernel(
    "rope",
    name="triton_rope",
    contract=Contract(dtypes=SUPPORTED_DTYPES),
    description="the project's Triton RoPE (half-split and interleaved, position offset, any strides, bf16)",
)
def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int = 0, interleaved: int = 0) -> torch.Tensor:
    """x[B, S, H, D] rotated by the angles of positions offset .. offset + S - 1 (cos, sin: [P, D/2])."""
    check_contract(x, cos, sin, offset, interleaved)
    return RoPEFunction.apply(x, cos, sin, offset, interleaved)
