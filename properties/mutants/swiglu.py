"""Hand-written mutants of the project's SwiGLU: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``) applied to ``kernels/swiglu.py`` in memory and
re-executed, so the mutant runs through the real wrapper and autograd code. ``why`` says how
the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.swiglu"
KERNEL = "triton_swiglu"

CATALOG = [
    dict(
        name="cat.sigmoid_of_b",
        bug_class="operand-swap",
        function="_swiglu_forward",
        old="s, _ = _sigmoid_pair(a)",
        new="s, _ = _sigmoid_pair(b)",
        why="the gate and the up projection swapped inside the sigmoid: a * sigmoid(b) * b",
    ),
    dict(
        name="cat.sigmoid_sign",
        bug_class="formula",
        function="_sigmoid_pair",
        old="s = tl.where(a >= 0, inv, e * inv)",
        new="s = tl.where(a >= 0, e * inv, inv)",
        why="the two branches of the stable sigmoid swapped, i.e. sigmoid(-a); invisible at a = 0",
    ),
    dict(
        name="cat.silu_derivative_is_sigmoid",
        bug_class="derivative",
        function="_swiglu_backward",
        old="da = dy * b * s * (1.0 + a * one_minus_s)",
        new="da = dy * b * s",
        why="d silu(a) / da taken as sigmoid(a), forgetting the product rule on a * sigmoid(a)",
    ),
    dict(
        name="cat.silu_derivative_sign",
        bug_class="derivative",
        function="_swiglu_backward",
        old="(1.0 + a * one_minus_s)",
        new="(1.0 - a * one_minus_s)",
        why="a sign slip in sigmoid' = s (1 - s) inside the silu derivative",
    ),
    dict(
        name="cat.db_missing_sigmoid",
        bug_class="derivative",
        function="_swiglu_backward",
        old="db = dy * a * s",
        new="db = dy * a",
        why="db = dy * a instead of dy * silu(a): the gate's sigmoid forgotten",
    ),
    dict(
        name="cat.grid_floor_columns",
        bug_class="grid",
        function="_grid",
        old="triton.cdiv(n, block_n))",
        new="n // block_n)",
        why="the column grid uses floor division: the last n % block_n columns are never "
        "written (all of them when n < block_n)",
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
        name="cat.b_strides_of_a",
        bug_class="layout",
        function="_forward",
        old="b.stride(0), b.stride(1)",
        new="a.stride(0), a.stride(1)",
        why="b indexed with a's strides (copy-paste); invisible whenever a and b share a layout",
    ),
    dict(
        name="cat.output_row_stride_block",
        bug_class="row-offset",
        function="_swiglu_forward",
        old="Y + rows[:, None] * N",
        new="Y + rows[:, None] * BLOCK_N",
        why="the output row offset uses the column tile width as the row length; wrong unless "
        "N equals BLOCK_N",
    ),
    row_offset_int32(
        function="_swiglu_forward",
        old="rows = tl.program_id(0).to(tl.int64) * ROWS",
        new="rows = tl.program_id(0) * ROWS",
        what="the forward's row index left in int32 (rows * stride_am and rows * stride_bm computed in int32)",
    ),
]

register_catalog("swiglu", kernel=KERNEL, module=MODULE, entries=CATALOG)
