"""Hand-written mutants of the project's softmax: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``) applied to ``kernels/softmax.py`` in memory and re-executed, so the
mutant runs through the real wrapper and autograd code. ``why`` says how the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.softmax"
KERNEL = "triton_softmax"

CATALOG = [
    dict(
        name="cat.max_padding_zero",
        bug_class="mask",
        function="_softmax_forward",
        old='other=float("-inf")).to(tl.float32)\n        m_acc',
        new="other=0.0).to(tl.float32)\n        m_acc",
        why="padding lanes read 0 in the max pass: a row whose values are all negative gets a "
        "max of 0, so exp(x - m) underflows on rows far below 0",
    ),
    dict(
        name="cat.sum_padding_zero",
        bug_class="mask",
        function="_softmax_forward",
        old='other=float("-inf")).to(tl.float32)\n        s_acc',
        new="other=0.0).to(tl.float32)\n        s_acc",
        why="padding lanes read 0 in the sum pass and add exp(0 - m) each to the denominator; "
        "invisible when N fills the block",
    ),
    dict(
        name="cat.no_max_subtraction",
        bug_class="overflow",
        function="_softmax_forward",
        patches=[
            ("s_acc += tl.exp(x - m)", "s_acc += tl.exp(x)"),
            ("y = tl.exp(x - m) / s", "y = tl.exp(x) / s"),
            ("tl.store(MAX + row, m, mask=in_rows)", "tl.store(MAX + row, m * 0.0, mask=in_rows)"),
        ],
        why="the naive softmax exp(x) / sum(exp(x)) without the max shift: exp overflows to inf "
        "for x above about 88 (fp32) and the row becomes NaN",
    ),
    dict(
        name="cat.max_of_last_block",
        bug_class="loop-carry",
        function="_softmax_forward",
        old="m_acc = tl.maximum(m_acc, x)",
        new="m_acc = x",
        why="the running max is overwritten by each block instead of carried; invisible when a "
        "row fits in one block",
    ),
    dict(
        name="cat.sum_restarted_per_block",
        bug_class="loop-carry",
        function="_softmax_forward",
        old="s_acc += tl.exp(x - m)",
        new="s_acc = tl.exp(x - m)",
        why="the running sum is overwritten by each block instead of accumulated; invisible when "
        "a row fits in one block",
    ),
    dict(
        name="cat.dx_missing_c",
        bug_class="derivative",
        function="_softmax_backward",
        old="dx = tl.exp(x - m) / s * (dy - c)",
        new="dx = tl.exp(x - m) / s * dy",
        why="dx = y * dy, the diagonal of the Jacobian only (the -y * sum(y * dy) term forgotten)",
    ),
    dict(
        name="cat.c_without_p",
        bug_class="derivative",
        function="_softmax_backward",
        old="acc += tl.exp(x - m) / s * dy",
        new="acc += dy",
        why="c = sum(dy) instead of sum(y * dy); invisible when dy is constant along the row",
    ),
    dict(
        name="cat.dy_assumed_contiguous",
        bug_class="layout",
        function="_backward",
        old="dy.stride(0), dy.stride(1)",
        new="n, 1",
        why="the upstream gradient is indexed as if contiguous; autograd can hand over a "
        "transposed or expanded dy",
    ),
    dict(
        name="cat.row_offset_block",
        bug_class="row-offset",
        function="_softmax_forward",
        old="Y + row * N + cols",
        new="Y + row * BLOCK + cols",
        why="the output row offset uses the padded BLOCK as the row length; rows land in the "
        "wrong place unless N equals BLOCK",
    ),
    dict(
        name="cat.padding_minus_1e9",
        bug_class="mask",
        function="_softmax_forward",
        patches=[
            ('other=float("-inf")).to(tl.float32)\n        m_acc', "other=-1e9).to(tl.float32)\n        m_acc"),
            ('other=float("-inf")).to(tl.float32)\n        s_acc', "other=-1e9).to(tl.float32)\n        s_acc"),
        ],
        why="padding lanes read -1e9 as a stand-in for -inf (a habit from attention masks): "
        "exp(-1e9 - m) is 0 on ordinary rows, but on a row masked with -1e9 the max is -1e9 "
        "and each padding lane adds exp(0) = 1, so y = 1/(N + pad) instead of 1/N",
    ),
    dict(
        name="cat.logsumexp_form",
        bug_class="cancellation",
        function="_softmax_forward",
        old="y = tl.exp(x - m) / s",
        new="y = tl.exp(x - (m + tl.log(s)))",
        why="y = exp(x - logsumexp) with logsumexp = m + log(s) formed first: on a row of large "
        "values (fp32 at -1e9 has an ulp of 64) m + log(s) rounds log(s) away, and a masked "
        "row comes out as y = 1 everywhere instead of 1/N",
    ),
    dict(
        name="cat.online_without_inf_guard",
        bug_class="nonfinite",
        function="_softmax_forward",
        patches=[
            ("""    m = tl.max(m_acc, axis=1)[:, None]
    s_acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=in_rows & (cols < N), other=float("-inf")).to(tl.float32)
        s_acc += tl.exp(x - m)
    s = tl.sum(s_acc, axis=1)[:, None]""", """    m = tl.max(m_acc, axis=1)[:, None]
    m_acc = tl.full([ROWS, BLOCK], float("-inf"), dtype=tl.float32)
    s_acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = in_rows & (cols < N)
        x = tl.load(x_row + cols.to(tl.int64) * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_acc, x)
        s_new = s_acc * tl.exp(m_acc - m_new) + tl.exp(x - m_new)
        s_acc = tl.where(mask, s_new, s_acc)
        m_acc = tl.where(mask, m_new, m_acc)
    s = tl.sum(s_acc * tl.exp(m_acc - m), axis=1)[:, None]"""),
        ],
        why="an online (running max) sum per lane whose rescaling exp(m_old - m_new) is not "
        "guarded for a lane that has seen only -inf so far: exp(-inf - (-inf)) = NaN, and a row "
        "holding a -inf (a masked position) becomes NaN; padding lanes are masked out, so no "
        "finite input shows it",
    ),
    row_offset_int32(
        function="_softmax_forward",
        old="row = tl.program_id(0).to(tl.int64)",
        new="row = tl.program_id(0)",
        what="the forward's row offset X + row * stride_xm computed in int32 (the .to(tl.int64) forgotten)",
    ),
]

register_catalog("softmax", kernel=KERNEL, module=MODULE, entries=CATALOG)
