"""Hand-written mutants of the project's fused linear + cross-entropy: one real bug class each.

Text patches (``old`` -> ``new``, matching exactly once inside ``function``) are applied to
``kernels/fused_linear_ce.py`` in memory and re-executed, so each mutant runs through the real
wrapper and autograd code. The tutorial's three named bugs come first; the race on dW cannot be a
patch (it needs a different grid), so it is a small hand-written kernel at the end, and it is
the one mutant the interpreter cannot kill: its programs run one after another there.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32
from harness.registry.registry import Origin, REGISTRY, register_mutant
from kernels import fused_linear_ce as flce

OP = "fused_linear_cross_entropy"
MODULE = "kernels.fused_linear_ce"
KERNEL = "triton_flce"

CATALOG = [
    dict(
        name="cat.no_max_subtraction",
        bug_class="numerical-stability",
        function="_lse_partials",
        old="m_new = tl.maximum(m, tl.max(z, axis=1))",
        new="m_new = tl.zeros([BLOCK_N], dtype=tl.float32)",
        why="the tutorial's first bug: exponentials of the raw logits, no running max subtracted; "
        "exp overflows to inf in fp32 once a logit exceeds ~88 (the 'large' value kind)",
    ),
    dict(
        name="cat.dw_chunk_overwritten",
        bug_class="chunking",
        function="_backward",
        old="ACCUMULATE=r0 > 0",
        new="ACCUMULATE=r0 > chunk",
        why="the tutorial's 'chunk of rows left out of dW': the second chunk overwrites dW instead of "
        "adding to it, so the first chunk's rows never reach dW; invisible with one or two chunks "
        "only if N <= chunk",
    ),
    dict(
        name="cat.running_sum_not_rescaled",
        bug_class="online-softmax",
        function="_lse_partials",
        old="s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new[:, None]), axis=1)",
        new="s = s + tl.sum(tl.exp(z - m_new[:, None]), axis=1)",
        why="the running sum of exponentials is not rescaled when a later vocabulary tile raises "
        "the max; only visible when one program walks two or more tiles",
    ),
    dict(
        name="cat.split_merge_not_rescaled",
        bug_class="partial-merge",
        function="_forward",
        old="lse = top + torch.log((s * torch.exp(m - top)).sum(0))",
        new="lse = top + torch.log(s.sum(0))",
        why="the vocabulary splits' partial sums are added without bringing them to a common max; "
        "only visible when the vocabulary is split across programs",
    ),
    dict(
        name="cat.vocab_mask_off_by_one",
        bug_class="mask",
        function="_lse_partials",
        old="col_ok = (cols < V)[None, :]",
        new="col_ok = (cols <= V)[None, :]",
        why="an inclusive bound on the vocabulary tile mask: the padding column V enters the "
        "log-sum-exp with logit 0; invisible when V is a multiple of the tile",
    ),
    dict(
        name="cat.ignore_index_not_in_backward",
        bug_class="ignore-index",
        function="_dlogits",
        old="valid = row_ok & (t != ignore_index)",
        new="valid = row_ok",
        why="ignored rows get a gradient (their softmax) in the backward although the forward "
        "skipped them; invisible when no row is ignored",
    ),
    dict(
        name="cat.ignore_index_hardcoded",
        bug_class="ignore-index-value",
        function="_forward",
        old="valid = target != ignore_index",
        new="valid = target != -100",
        why="the forward masks rows with torch's default -100 instead of the ignore_index passed "
        "in; invisible in tests that only use -100",
    ),
    dict(
        name="cat.mean_over_all_rows",
        bug_class="normalisation",
        function="_forward",
        old="loss = rows_loss.sum() / n_valid",
        new="loss = rows_loss.sum() / n",
        why="the loss is averaged over all N rows instead of the non-ignored ones; invisible when "
        "no row is ignored",
    ),
    dict(
        name="cat.all_ignored_returns_zero",
        bug_class="empty-mean",
        function="_forward",
        old="loss = rows_loss.sum() / n_valid",
        new="loss = rows_loss.sum() / n_valid.clamp(min=1)",
        why="a batch with every row ignored returns 0 (Liger-Kernel's choice) instead of torch's "
        "NaN; reported by the all_ignored check",
    ),
    dict(
        name="cat.upstream_ignored",
        bug_class="chain-rule",
        function="_backward",
        old="scale = (upstream.to(torch.float32) / n_valid",
        new="scale = (1.0 / n_valid",
        why="the backward assumes the upstream gradient is 1 (true for loss.backward() alone, wrong "
        "under loss scaling or a weighted sum of losses)",
    ),
    dict(
        name="cat.weight_assumed_contiguous_in_dx",
        bug_class="layout",
        function="_backward",
        old="gc.stride(0), gc.stride(1), weight.stride(0), weight.stride(1), dxc.stride(0)",
        new="gc.stride(0), gc.stride(1), d, 1, dxc.stride(0)",
        why="dx = G @ W indexes W as if it were contiguous [V, D]; wrong for a transposed or "
        "sliced weight (a tied embedding passed as a view)",
    ),
    dict(
        name="cat.target_assumed_contiguous",
        bug_class="layout",
        function="_forward",
        old="target.stride(0), tiles_per_split",
        new="1, tiles_per_split",
        why="the forward reads target[i] at offset i, ignoring its stride; wrong for a strided "
        "label view (labels[:, 1:] of a [B, S] tensor flattened without a copy)",
    ),
    row_offset_int32(
        function="_logits_tile",
        old="row_off = rows.to(tl.int64)[:, None] * stride_xn",
        new="row_off = rows[:, None] * stride_xn",
        what="the logits tile's row offset into x computed in int32 (rows * stride_xn without the cast)",
    ),
]

register_catalog(OP, kernel=KERNEL, module=MODULE, entries=CATALOG)


@triton.jit
def _dw_row_block_rmw(
    G,  # [C, V] softmax - onehot of the chunk, row stride stride_gn
    X,  # [C, D] the chunk's rows of x, strides (stride_xn, stride_xd)
    DW,  # [V, D] fp32 accumulator, contiguous, zero-initialised
    SCALE,  # [1] fp32 upstream / n_valid
    C,
    V,
    D,
    stride_gn,
    stride_xn,
    stride_xd,
    BLOCK_R: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    scale = tl.load(SCALE)
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        g = tl.load(G + rows[:, None] * stride_gn + cols[None, :], mask=(rows[:, None] < C) & (cols[None, :] < V), other=0.0)
        g = g.to(tl.float32)
        for d0 in range(0, D, BLOCK_D):
            ds = d0 + tl.arange(0, BLOCK_D)
            x = tl.load(
                X + rows[:, None] * stride_xn + ds[None, :] * stride_xd, mask=(rows[:, None] < C) & (ds[None, :] < D), other=0.0
            ).to(tl.float32)
            part = tl.dot(tl.trans(g), x, input_precision="ieee") * scale
            ptrs = DW + cols[:, None] * D + ds[None, :]
            inside = (cols[:, None] < V) & (ds[None, :] < D)
            tl.store(ptrs, tl.load(ptrs, mask=inside, other=0.0) + part, mask=inside)


class _RacyDW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, target, ignore_index):
        loss, lse, n_valid = flce._forward(x, weight, target, ignore_index)
        ctx.save_for_backward(x, weight, target, lse, n_valid)
        ctx.ignore_index = ignore_index
        return loss

    @staticmethod
    def backward(ctx, upstream):
        x, weight, target, lse, n_valid = ctx.saved_tensors
        dx, _ = flce._backward(x, weight, target, lse, n_valid, ctx.ignore_index, upstream, True, False)
        n, d = x.shape
        v = weight.shape[0]
        cfg = flce._config(x.dtype)
        scale = (upstream.to(torch.float32) / n_valid.clamp(min=1).to(torch.float32)).reshape(1)
        dw = torch.zeros((v, d), dtype=torch.float32, device=x.device)
        chunk = min(n, flce._chunk_rows(n, v, d, x.element_size()))
        g = torch.empty((chunk, v), dtype=x.dtype, device=x.device)
        for r0 in range(0, n, chunk):
            c = min(chunk, n - r0)
            xc, gc = x[r0 : r0 + c], g[:c]
            flce._dlogits[(triton.cdiv(c, cfg["BLOCK_N"]), triton.cdiv(v, cfg["BLOCK_V"]))](
                xc, weight, target[r0 : r0 + c], lse[r0 : r0 + c], gc, c, v, d,
                x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), target.stride(0), gc.stride(0),
                ctx.ignore_index, **cfg,
            )
            _dw_row_block_rmw[(triton.cdiv(c, 16),)](
                gc, xc, dw, scale, c, v, d, gc.stride(0), xc.stride(0), xc.stride(1), BLOCK_R=16, BLOCK_V=32, BLOCK_D=32
            )
        return dx, dw.to(weight.dtype), None, None


@register_mutant(
    OP,
    name="cat.dw_race_plain_rmw",
    contract=REGISTRY.get(OP, KERNEL).contract,
    origin=Origin.CATALOG,
    description="the tutorial's atomics replaced by a plain load + add + store: every 16-row program adds "
    "its rows' G^T @ x into every dW tile, so programs overlap and updates are lost on a GPU; "
    "a race only a GPU shows (the interpreter runs programs one after another, so it survives there)",
    meta={"operator": "catalog:race", "location": "properties/mutants/fused_linear_cross_entropy.py:_dw_row_block_rmw", "backends": ["cuda"]},
)
def dw_race_plain_rmw(x, weight, target, ignore_index=-100):
    flce.check_contract(x, weight, target, ignore_index)
    return _RacyDW.apply(x, weight, target, ignore_index)
