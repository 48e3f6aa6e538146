"""Hand-written mutants of the project's LayerNorm: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``) applied to ``kernels/layer_norm.py`` in memory and re-executed, so the
mutant runs through the real wrapper and autograd code. ``why`` says how the bug arises.
The 32-bit row index (program_id without .to(tl.int64), ``cat.row_offset_int32``) needs an
offset past 2^31 elements to show: only the CUDA floor's index-width cases hold one, so it is
declared ``backends=["cuda"]`` and listed apart by a campaign on the interpreter.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.layer_norm"
KERNEL = "triton_layer_norm"

CATALOG = [
    dict(
        name="cat.var_bessel",
        bug_class="reduction-length",
        function="_layer_norm_forward",
        old="tl.sum(acc, axis=1)[:, None] / N + eps",
        new="tl.sum(acc, axis=1)[:, None] / (N - 1) + eps",
        why="the sample variance (Bessel's 1/(N-1), torch.var's default) instead of the "
        "population variance LayerNorm uses; at N = 1 it divides by zero",
    ),
    dict(
        name="cat.mean_over_block",
        bug_class="reduction-length",
        function="_layer_norm_forward",
        old="mean = tl.sum(acc, axis=1)[:, None] / N",
        new="mean = tl.sum(acc, axis=1)[:, None] / BLOCK",
        why="the mean divides by the padded BLOCK instead of N; invisible whenever N is a "
        "multiple of BLOCK",
    ),
    dict(
        name="cat.padding_in_variance",
        bug_class="mask",
        function="_layer_norm_forward",
        old="d = tl.where(mask, x - mean, 0.0)",
        new="d = x - mean",
        why="padding lanes (loaded as 0) contribute mean^2 each to the variance; invisible when "
        "N fills the block or the mean is 0",
    ),
    dict(
        name="cat.one_pass_variance",
        bug_class="precision",
        function="_layer_norm_forward",
        patches=[
            ("acc += d * d", "acc += x * x"),
            ("tl.sum(acc, axis=1)[:, None] / N + eps", "tl.sum(acc, axis=1)[:, None] / N - mean * mean + eps"),
        ],
        why="var = E[x^2] - E[x]^2 in fp32 cancels catastrophically on rows with a large common "
        "offset (the textbook one-pass formula)",
    ),
    dict(
        name="cat.eps_missing",
        bug_class="formula",
        function="_layer_norm_forward",
        old="/ N + eps)",
        new="/ N)",
        why="eps left out of the rsqrt: constant rows divide by zero, small-variance rows blow up",
    ),
    dict(
        name="cat.dweight_mean",
        bug_class="reduction-kind",
        function="_layer_norm_backward_dwdb",
        old="tl.sum(acc_w, axis=0), mask",
        new="tl.sum(acc_w, axis=0) / M, mask",
        why="dweight averaged over the rows instead of summed (weight is shared by every row, so "
        "its gradient is a sum); invisible at M = 1",
    ),
    dict(
        name="cat.dx_missing_mean_g",
        bug_class="derivative",
        function="_layer_norm_backward_dx",
        old="dx = (dy * w - mean_g - xhat * mean_gx) * rstd",
        new="dx = (dy * w - xhat * mean_gx) * rstd",
        why="the derivative through the mean is dropped (the term -mean(g)); invisible when the "
        "row's dy * w sums to zero",
    ),
    dict(
        name="cat.weight_missing_in_dx_sums",
        bug_class="chain-rule",
        function="_layer_norm_backward_dx",
        old="g = dy * w",
        new="g = dy",
        why="the row sums of dx use dy instead of dy * weight (the chain rule through the affine "
        "part forgotten); invisible when weight is all ones",
    ),
    dict(
        name="cat.bias_grad_weighted",
        bug_class="chain-rule",
        function="_layer_norm_backward_dwdb",
        old="acc_b += dy",
        new="acc_b += dy * (x - mean[:, None]) * rstd[:, None]",
        why="dbias accumulates dy * xhat like dweight (copy-paste): dbias is the plain column sum "
        "of dy",
    ),
    dict(
        name="cat.dwdb_x_assumed_contiguous",
        bug_class="layout",
        function="_layer_norm_backward_dwdb",
        old="rows[:, None] * stride_xm + col_off[None, :] * stride_xn",
        new="rows[:, None] * N + col_off[None, :]",
        why="the dweight kernel indexes x as if it were contiguous; wrong for a transposed or "
        "row-padded x",
    ),
    dict(
        name="cat.last_group_dropped",
        bug_class="reduction-bound",
        function="_sum_partials",
        old="mask = (rows[:, None] < P)",
        new="mask = (rows[:, None] < P - 1)",
        why="the partial-sum reduction skips the last group of rows (an off-by-one in the count "
        "of programs); invisible when only one group runs",
    ),
    row_offset_int32(
        function="_layer_norm_forward",
        old="row = tl.program_id(0).to(tl.int64)",
        new="row = tl.program_id(0)",
        what="the forward's row offset X + row * stride_xm computed in int32 (the .to(tl.int64) forgotten)",
    ),
]

register_catalog("layer_norm", kernel=KERNEL, module=MODULE, entries=CATALOG)
