"""Hand-written mutants of the project's RMSNorm: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``, each matching exactly
once inside ``function``) applied to ``kernels/rmsnorm.py`` in memory and re-executed, so the mutant runs
through the real wrapper and autograd code. ``why`` says how the bug arises in practice.
The first five are the tutorial's named bugs.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.rmsnorm"
KERNEL = "triton_rmsnorm"

CATALOG = [
    dict(
        name="cat.block_divisor_forward",
        bug_class="reduction-length",
        function="_rmsnorm_forward",
        old="/ N + eps",
        new="/ BLOCK + eps",
        why="the mean of x^2 divides by the padded BLOCK instead of N (the tutorial's exercise); "
        "invisible whenever N is a power of two",
    ),
    dict(
        name="cat.block_divisor_backward",
        bug_class="reduction-length",
        function="_rmsnorm_backward",
        old="/ N\n",
        new="/ BLOCK\n",
        why="the backward's mean(u*x) copied from a block-level sum divides by BLOCK; only dx is "
        "wrong, and only when N is not a power of two",
    ),
    dict(
        name="cat.dgamma_mean",
        bug_class="reduction-kind",
        function="_rmsnorm_backward",
        old="tl.store(PARTIAL + pid.to(tl.int64) * N + cols, ",
        new="tl.store(PARTIAL + pid.to(tl.int64) * N + cols, (1.0 / M) * ",
        why="dgamma averaged over the rows instead of summed (gamma is shared by every row, so "
        "its gradient is a sum); invisible at M = 1",
    ),
    dict(
        name="cat.r_squared",
        bug_class="derivative",
        function="_rmsnorm_backward",
        old="rstd * rstd * rstd",
        new="rstd * rstd",
        why="d r / d x_i = -x_i r^3 / N derived by hand with r^2; invisible when r == 1",
    ),
    dict(
        name="cat.row_offset_block",
        bug_class="row-offset",
        function="_rmsnorm_forward",
        old="* N + cols",
        new="* BLOCK + cols",
        why="the output row offset uses the padded BLOCK as the row length; rows land in the "
        "wrong place (and past the end of Y) unless N is a power of two",
    ),
    dict(
        name="cat.fp16_accumulation",
        bug_class="precision",
        function="_rmsnorm_forward",
        old="x * x",
        new="x.to(X.dtype.element_ty) * x.to(X.dtype.element_ty)",
        why="the squares are computed in the input precision (the upcast placed after the "
        "product), so x^2 overflows fp16 for |x| around 300 (fp16's max is 65504)",
    ),
    dict(
        name="cat.mask_off_by_one",
        bug_class="mask",
        function="_rmsnorm_backward",
        old="cols < N",
        new="cols <= N",
        why="an inclusive bound on the column mask: lane N (the next row's first element, or "
        "past the end of gamma) is read and a dx element past the row is written",
    ),
    dict(
        name="cat.eps_outside_sqrt",
        bug_class="formula",
        function="_rmsnorm_forward",
        patches=[("tl.rsqrt(", "1.0 / (tl.sqrt("), ("/ N + eps)", "/ N) + eps)")],
        why="eps added to the root instead of inside it (LayerNorm-style code ported by hand); "
        "only visible for rows whose mean square is comparable to eps",
    ),
    dict(
        name="cat.x_assumed_contiguous",
        bug_class="layout",
        function="_rmsnorm_forward",
        patches=[("* stride_xm", "* N"), (" * stride_xn", "")],
        why="the forward indexes x as if it were contiguous (the wrapper forgot to pass strides "
        "or to call .contiguous()); wrong for transposed or sliced inputs",
    ),
    dict(
        name="cat.dy_assumed_contiguous",
        bug_class="layout",
        function="_rows_of",
        patches=[("* stride_dym", "* N"), (" * stride_dyn", "")],
        why="the upstream gradient is assumed contiguous; autograd often hands a transposed or "
        "expanded dy, so dx and dgamma read the wrong elements",
    ),
    dict(
        name="cat.gamma_missing_in_dx",
        bug_class="chain-rule",
        function="_rmsnorm_backward",
        old="u = dy * g",
        new="u = dy  # the gamma factor forgotten; was: dy * g",
        why="dx written from the normalisation's derivative alone, forgetting the gamma factor; "
        "invisible in tests that use gamma = 1",
    ),
    dict(
        name="cat.partials_grid_floor",
        bug_class="grid",
        function="_backward",
        old="launch(_sum_partials, (triton.cdiv(n, block_n),)",
        new="launch(_sum_partials, (n // block_n,)",
        why="the reduction grid uses floor instead of ceiling division: the last N % BLOCK_N "
        "columns of dgamma are never written (all of them when N < BLOCK_N)",
    ),
    dict(
        name="cat.last_partial_dropped",
        bug_class="reduction-bound",
        function="_sum_partials",
        old="mask = (rows[:, None] < P)",
        new="mask = (rows[:, None] < P - 1)",
        why="the partial-sum reduction skips the last program's row of partials (an off-by-one "
        "in the count of programs); invisible when only one program runs (M = 1)",
    ),
    row_offset_int32(
        function="_rmsnorm_forward",
        old="rows = tl.program_id(0).to(tl.int64) * ROWS",
        new="rows = tl.program_id(0) * ROWS",
        what="the forward's row index left in int32 (rows * stride_xm computed in int32)",
    ),
]

register_catalog("rmsnorm", kernel=KERNEL, module=MODULE, entries=CATALOG)
