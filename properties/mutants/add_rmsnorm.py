"""Hand-written mutants of the project's fused add + RMSNorm: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``, or the whole module where ``function`` is None) applied to
``kernels/add_rmsnorm.py`` in memory and re-executed, so the mutant runs through the real wrapper
and autograd code. ``why`` says how the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.add_rmsnorm"
KERNEL = "triton_add_rmsnorm"
H_STORE = "tl.store(H + rows[:, None] * N + cols[None, :], h.to(H.dtype.element_ty), mask=mask)"

CATALOG = [
    dict(
        name="cat.h_not_written",
        bug_class="missing-output",
        function="_add_rmsnorm_forward",
        old=H_STORE,
        new="pass",
        why="the in-place residual update of a fused kernel dropped when h became an output of its "
        "own: h is returned as allocated, never written",
    ),
    dict(
        name="cat.h_written_before_add",
        bug_class="missing-output",
        function="_add_rmsnorm_forward",
        old=H_STORE,
        new="tl.store(H + rows[:, None] * N + cols[None, :], x.to(H.dtype.element_ty), mask=mask)",
        why="h stored from the loaded x before the residual is added (the store moved above the add): "
        "the residual stream loses the residual",
    ),
    dict(
        name="cat.h_fp32",
        bug_class="dtype",
        function="_forward",
        old="h = torch.empty((m, n), dtype=x.dtype, device=x.device)",
        new="h = torch.empty((m, n), dtype=torch.float32, device=x.device)",
        why="h kept in the fp32 it is computed in instead of x's dtype: the residual stream doubles its "
        "memory and changes dtype under the caller (and so do dx and dresidual)",
    ),
    dict(
        name="cat.y_from_x",
        bug_class="wrong-operand",
        function="_add_rmsnorm_forward",
        old="y = h * rstd[:, None] * g[None, :]",
        new="y = x * rstd[:, None] * g[None, :]",
        why="y normalises x with h's 1/rms (the unfused RMSNorm's line kept): right only where the "
        "residual is 0",
    ),
    dict(
        name="cat.dresidual_missing_dh",
        bug_class="wrong-gradient",
        function="_add_rmsnorm_backward",
        old="tl.store(DR + rows[:, None] * N + cols[None, :], dx.to(DR.dtype.element_ty), mask=mask)",
        new="tl.store(DR + rows[:, None] * N + cols[None, :], (dx - dh).to(DR.dtype.element_ty), mask=mask)",
        why="dresidual written as the normalisation's gradient alone: the gradient flowing back along the "
        "residual stream (dh) is dropped from it",
    ),
    dict(
        name="cat.dx_missing_dh",
        bug_class="wrong-gradient",
        function="_add_rmsnorm_backward",
        old="dx = dh + rstd[:, None] * u",
        new="dx = rstd[:, None] * u",
        why="the backward of a plain RMSNorm reused: the upstream gradient of h never reaches dx or "
        "dresidual (invisible when h is not used downstream)",
    ),
    dict(
        name="cat.dgamma_from_x",
        bug_class="wrong-operand",
        function=None,
        patches=[
            ("    H,  # [M, N] the stored h, contiguous\n", "    H,  # [M, N] the stored h, contiguous\n    XC,\n"),
            ("acc += dy * h * rstd[:, None]",
             "acc += dy * tl.load(XC + rows[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32) "
             "* rstd[:, None]"),
            ("ctx.save_for_backward(h, gamma)", "ctx.save_for_backward(h, gamma, x)"),
            ("h, gamma = ctx.saved_tensors\n        dx, dres, dgamma = _backward(h, gamma, dy, dh, ctx.eps)",
             "h, gamma, x = ctx.saved_tensors\n        dx, dres, dgamma = _backward(h, gamma, dy, dh, ctx.eps, "
             "x.contiguous())"),
            ("def _backward(h, gamma, dy, dh, eps: float):", "def _backward(h, gamma, dy, dh, eps: float, xc=None):"),
            ("        h, gamma, dy, dh, dx, dres, partial, m, n,", "        h, xc, gamma, dy, dh, dx, dres, partial, m, n,"),
        ],
        why="dgamma summed over dy * x * r, RMSNorm's formula with its input x, where the normalised "
        "value is h = x + residual",
    ),
    dict(
        name="cat.block_divisor_forward",
        bug_class="reduction",
        function="_add_rmsnorm_forward",
        old="tl.sum(h * h, axis=1) / N + eps",
        new="tl.sum(h * h, axis=1) / BLOCK + eps",
        why="the mean of h^2 divided by the block size instead of N: right only when N is a power of two",
    ),
    dict(
        name="cat.block_divisor_backward",
        bug_class="reduction",
        function="_add_rmsnorm_backward",
        old="mean_uh = tl.sum(u * h, axis=1) / N",
        new="mean_uh = tl.sum(u * h, axis=1) / BLOCK",
        why="the backward's mean(u * h) divided by the block size instead of N",
    ),
    dict(
        name="cat.dgamma_mean",
        bug_class="reduction",
        function="_add_rmsnorm_backward",
        old="acc += dy * h * rstd[:, None]",
        new="acc += dy * h * rstd[:, None] / M",
        why="dgamma averaged over the rows instead of summed (a batch mean carried into a weight gradient)",
    ),
    dict(
        name="cat.padding_in_variance",
        bug_class="mask",
        function="_add_rmsnorm_forward",
        old="r = tl.load(R + rows[:, None] * stride_rm + cols[None, :] * stride_rn, mask=mask, other=0.0)",
        new="r = tl.load(R + rows[:, None] * stride_rm + cols[None, :] * stride_rn, mask=mask, other=1.0)",
        why="padding lanes of the residual read 1 instead of 0: h^2 = 1 per padding lane leaks into the "
        "variance; invisible when N fills the block",
    ),
    dict(
        name="cat.residual_assumed_contiguous",
        bug_class="stride",
        function="_add_rmsnorm_forward",
        old="R + rows[:, None] * stride_rm + cols[None, :] * stride_rn",
        new="R + rows[:, None] * N + cols[None, :]",
        why="the residual indexed as if contiguous: a residual stream that is a view (a slice of a "
        "larger buffer, a transpose) is read from the wrong places",
    ),
    dict(
        name="cat.dh_assumed_contiguous",
        bug_class="stride",
        function="_add_rmsnorm_backward",
        old="DH + rows[:, None] * stride_dhm + cols[None, :] * stride_dhn",
        new="DH + rows[:, None] * N + cols[None, :]",
        why="the upstream gradient of h indexed as if contiguous; autograd can hand over a strided one",
    ),
    dict(
        name="cat.eps_outside_sqrt",
        bug_class="formula",
        function="_add_rmsnorm_forward",
        old="rstd = tl.rsqrt(tl.sum(h * h, axis=1) / N + eps)",
        new="rstd = 1.0 / (tl.sqrt(tl.sum(h * h, axis=1) / N) + eps)",
        why="eps added to the rms instead of to the mean square: differs where mean(h^2) is near eps "
        "(tiny rows, eps = 0.1)",
    ),
    row_offset_int32(
        function="_add_rmsnorm_forward",
        old="rows = tl.program_id(0).to(tl.int64) * ROWS",
        new="rows = tl.program_id(0) * ROWS",
        what="the forward's row offset X + rows * stride_xm computed in int32 (the .to(tl.int64) forgotten)",
    ),
]

register_catalog("add_rmsnorm", kernel=KERNEL, module=MODULE, entries=CATALOG)
