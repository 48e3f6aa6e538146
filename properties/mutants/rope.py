"""Hand-written mutants of the project's RoPE: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``) applied to ``kernels/rope.py`` in memory and
re-executed, so the mutant runs through the real wrapper and autograd code. ``why`` says how
the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.rope"
KERNEL = "triton_rope"

CATALOG = [
    dict(
        name="cat.halves_swapped",
        bug_class="operand-swap",
        function="_rope_rotate",
        patches=[
            ("x1 = tl.load(x_row + col1[None, :]", "x1 = tl.load(x_row + col2[None, :]"),
            ("x2 = tl.load(x_row + col2[None, :]", "x2 = tl.load(x_row + col1[None, :]"),
        ],
        why="the wrong half taken as the first of the pair (x1 read from x[..., R:], x2 from "
        "x[..., :R]): rotate_half's cat(-x2, x1) written the other way round",
    ),
    dict(
        name="cat.sine_sign",
        bug_class="formula",
        function="_rope_rotate",
        patches=[
            ("(x1 * c - x2 * sn)", "(x1 * c + x2 * sn)"),
            ("(x2 * c + x1 * sn)", "(x2 * c - x1 * sn)"),
        ],
        why="the sign of the sine term flipped: a rotation by -theta (the convention of a "
        "framework whose sin table is negated, or the backward's formula used forward)",
    ),
    dict(
        name="cat.offset_ignored",
        bug_class="indexing",
        function="_rope_rotate",
        old="pos = (s + offset)[:, None]",
        new="pos = s[:, None]",
        why="cos and sin read at the sequence index instead of the position offset + s: right "
        "for prefill (offset 0), wrong for every decode step",
    ),
    dict(
        name="cat.interleaved_confused",
        bug_class="convention",
        function="_rotate",
        old="INTERLEAVED=bool(interleaved)",
        new="INTERLEAVED=not interleaved",
        why="the GPT-J (interleaved) and GPT-NeoX (half-split) pairings confused: the flag's "
        "sense inverted, so each convention rotates the other's pairs",
    ),
    dict(
        name="cat.last_row_block_dropped",
        bug_class="grid",
        function="_rotate",
        old="triton.cdiv(n_rows, rows)",
        new="n_rows // rows",
        why="the row grid uses floor division: the last partial block of rows is never written "
        "(all rows when B * S * H is below a tile)",
    ),
    dict(
        name="cat.last_pair_block_dropped",
        bug_class="grid",
        function="_rotate",
        old="triton.cdiv(r, block_r)",
        new="r // block_r",
        why="the pair grid uses floor division: the last r % BLOCK_R pairs of every row are never "
        "written (D = 130: all of them)",
    ),
    dict(
        name="cat.sin_strides_of_cos",
        bug_class="layout",
        function="_rotate",
        old="*cos.stride(), *sin.stride()",
        new="*cos.stride(), *cos.stride()",
        why="sin indexed with cos's strides (copy-paste); invisible whenever the tables share a layout",
    ),
    dict(
        name="cat.output_row_stride_block",
        bug_class="row-offset",
        function="_rope_rotate",
        old="Y + (rows * (2 * R))",
        new="Y + (rows * (2 * BLOCK_R))",
        why="the output row offset uses the padded tile width as the head dim; wrong unless R "
        "equals BLOCK_R",
    ),
    dict(
        name="cat.backward_not_transposed",
        bug_class="derivative",
        function="backward",
        old="ctx.interleaved, -1)",
        new="ctx.interleaved, 1)",
        why="the backward rotates dy by theta again instead of by -theta: the gradient of a "
        "rotation taken as the rotation itself rather than its transpose",
    ),
    row_offset_int32(
        function="_rope_rotate",
        old="rows = tl.program_id(0).to(tl.int64) * ROWS",
        new="rows = tl.program_id(0) * ROWS",
        what="the row index left in int32 (b * stride_xb and rows * D computed in int32)",
    ),
]

register_catalog("rope", kernel=KERNEL, module=MODULE, entries=CATALOG)
