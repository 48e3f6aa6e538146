"""Hand-written mutants of the project's cross-entropy: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``, or inside the module when ``function`` is None) applied to
``kernels/cross_entropy.py`` in memory and re-executed, so the mutant runs through the real
wrapper and autograd code. ``why`` says how the bug arises.

Not a bug under the op's error model, so not in the catalog: forming logsumexp before
subtracting the target logit, ``(m + log(s)) - x_t``. Rounding m + log(s) moves the loss by
u * |m|, which is what rounding the target logit x_t (~ m on a confident row) within fp32 does:
the result is exact for inputs perturbed within the compute dtype's rounding, the criterion the
op's tolerance implements (properties/ops/cross_entropy.py), and campaigns on the interpreter and
the H200 both let it pass.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.cross_entropy"
KERNEL = "triton_cross_entropy"

CATALOG = [
    dict(
        name="cat.mean_over_all_rows",
        bug_class="reduction-length",
        function="_cross_entropy_mean",
        old="/ n_valid.to(tl.float32)",
        new="/ N",
        why="the mean divides by all N rows, ignored ones included (torch divides by the "
        "non-ignored count); invisible when no row is ignored",
    ),
    dict(
        name="cat.all_ignored_returns_zero",
        bug_class="semantics",
        function="_cross_entropy_mean",
        old="/ n_valid.to(tl.float32)",
        new="/ tl.maximum(n_valid, 1).to(tl.float32)",
        why="a guard against 0/0 returns 0 where torch returns NaN when every row is ignored "
        "(a deliberate choice in some libraries, a silent divergence here)",
    ),
    dict(
        name="cat.ignored_rows_get_gradient",
        bug_class="mask",
        function="_cross_entropy_backward",
        old="dx * tl.where(valid, 1.0, 0.0)",
        new="dx",
        why="ignored rows receive softmax - onehot like any other row instead of zero gradient",
    ),
    dict(
        name="cat.ignored_rows_in_loss",
        bug_class="mask",
        function=None,
        patches=[
            ("tl.store(LOSS + row, tl.where(valid, loss, 0.0), mask=in_rows)", "tl.store(LOSS + row, loss, mask=in_rows)"),
            ("tl.load(LOSS + rows, mask=valid, other=0.0)", "tl.load(LOSS + rows, mask=mask, other=0.0)"),
            ("count += valid.to(tl.int32)", "count += mask.to(tl.int32)"),
        ],
        why="ignore_index never applied in the loss: ignored rows add their (garbage-target) "
        "loss and count in the mean; each guard alone is doubled, so all three are removed",
    ),
    dict(
        name="cat.target_logit_of_row_0",
        bug_class="row-offset",
        function="_cross_entropy_forward",
        old="x_t = tl.load(x_row + ",
        new="x_t = tl.load(X + ",
        why="the target logit is read from row 0 (the row offset forgotten); invisible at N = 1",
    ),
    dict(
        name="cat.max_padding_zero",
        bug_class="mask",
        function="_cross_entropy_forward",
        old='other=float("-inf")).to(tl.float32)\n        m_acc',
        new="other=0.0).to(tl.float32)\n        m_acc",
        why="padding lanes read 0 in the max pass: rows of very negative logits get a max of 0 "
        "and exp(x - m) underflows",
    ),
    dict(
        name="cat.no_max_subtraction",
        bug_class="overflow",
        function="_cross_entropy_forward",
        patches=[
            ("s_acc += tl.exp(x - m)", "s_acc += tl.exp(x)"),
            ("loss = tl.log(s) + (m - x_t)", "loss = tl.log(s) - x_t"),
            ("tl.store(MAX + row, m, mask=in_rows)", "tl.store(MAX + row, m * 0.0, mask=in_rows)"),
        ],
        why="the naive log(sum(exp(x))) without the max shift overflows for logits above about 88",
    ),
    dict(
        name="cat.grad_not_divided_by_count",
        bug_class="derivative",
        function="_cross_entropy_backward",
        old=" / tl.maximum(n_valid, 1.0)",
        new="",
        why="the gradient of a mean not divided by the row count: the gradient of the sum",
    ),
    dict(
        name="cat.upstream_assumed_one",
        bug_class="chain-rule",
        function="_cross_entropy_backward",
        old="scale = tl.load(DLOSS).to(tl.float32) / ",
        new="scale = 1.0 / ",
        why="the upstream gradient of the scalar loss assumed to be 1 (true for loss.backward() "
        "alone, wrong once the loss is scaled)",
    ),
    dict(
        name="cat.onehot_off_by_one",
        bug_class="index",
        function="_cross_entropy_backward",
        old="tl.where(cols == t, 1.0, 0.0)",
        new="tl.where(cols == t + 1, 1.0, 0.0)",
        why="the one-hot of the target shifted by one column (a 1-based index)",
    ),
    row_offset_int32(
        function="_cross_entropy_forward",
        old="row = tl.program_id(0).to(tl.int64)",
        new="row = tl.program_id(0)",
        what="the forward's row offset X + row * stride_xm computed in int32 (the .to(tl.int64) forgotten, "
        "Liger's cross-entropy as in #251)",
    ),
]

register_catalog("cross_entropy", kernel=KERNEL, module=MODULE, entries=CATALOG)
