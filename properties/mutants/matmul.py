"""Hand-written mutants of the project's matmul: realistic bugs, one distinct class each.

Each entry is a text patch (``old`` -> ``new``, or several ``patches``) applied to
``kernels/matmul.py`` in memory and re-executed, so the mutant runs through the real wrapper and
autograd code. ``why`` says how the bug arises.
"""

from __future__ import annotations

from harness.mutation.mutagen import register_catalog
from properties.mutants import row_offset_int32

MODULE = "kernels.matmul"
KERNEL = "triton_matmul"

CATALOG = [
    dict(
        name="cat.k_loop_one_tile_short",
        bug_class="loop-bound",
        function="_matmul",
        old="for k0 in range(0, K, BLOCK_K):",
        new="for k0 in range(0, K - BLOCK_K, BLOCK_K):",
        why="the K loop stops a tile early (a bound written for K a multiple of BLOCK_K, minus the "
        "tile handled after the loop, then that epilogue tile forgotten)",
    ),
    dict(
        name="cat.accumulator_in_input_dtype",
        bug_class="accumulation",
        function="_matmul",
        old="acc = tl.dot(a, b, acc, input_precision=PRECISION)",
        new="acc = (acc + tl.dot(a, b, input_precision=PRECISION)).to(A.dtype.element_ty).to(tl.float32)",
        why="the running sum kept in the input dtype (an fp16/bf16 accumulator): each K tile's "
        "partial sum rounded to the input dtype; invisible for fp32 inputs and for K in one tile",
    ),
    dict(
        name="cat.k_mask_dropped",
        bug_class="mask",
        function="_matmul",
        patches=[
            ("mask=(rm < M)[:, None] & (ks < K)[None, :], other=0.0)", "mask=(rm < M)[:, None], other=0.0)"),
            ("mask=(ks < K)[:, None] & (rn < N)[None, :], other=0.0)", "mask=(rn < N)[None, :], other=0.0)"),
        ],
        why="the loads masked on rows and columns but not on K: the last tile reads past K (the "
        "next row of a, rows past the end of b); invisible when BLOCK_K divides K",
    ),
    dict(
        name="cat.epilogue_before_bias",
        bug_class="epilogue-order",
        function="_matmul",
        patches=[
            ("""    if HAS_BIAS:
        acc += tl.load(BIAS + rn * stride_bias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    mask = (rm < M)[:, None] & (rn < N)[None, :]""", """    mask = (rm < M)[:, None] & (rn < N)[None, :]"""),
            ("""    tl.store(Y + out, acc.to(Y.dtype.element_ty), mask=mask)""", """    if HAS_BIAS:
        acc += tl.load(BIAS + rn * stride_bias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(Y + out, acc.to(Y.dtype.element_ty), mask=mask)"""),
        ],
        why="the activation applied to a @ b and the bias added after it: act(a @ b) + bias; "
        "the same function only for activation none",
    ),
    dict(
        name="cat.tf32_for_fp32",
        bug_class="precision",
        function="_product",
        old='precision = "ieee" if torch.float32 in (a.dtype, b.dtype) else "tf32"',
        new='precision = "tf32"',
        why="fp32 inputs left on tl.dot's default TF32 (10-bit mantissa): thousands of fp32 "
        "roundings off; the Triton interpreter computes tl.dot in full fp32 whatever the "
        "precision, so only a GPU shows it (tests/fixtures/tf32_matmul.py emulates it on the CPU: "
        "the op fails it unless Contract(precision=('tfloat32', 2)) declares it)",
        backends=["cuda"],
    ),
    dict(
        name="cat.relu_grad_at_output",
        bug_class="derivative",
        function="_activation_grad",
        old="dz = tl.where(z <= 0, 0.0, dy)",
        new="dz = dy",
        why="relu's gradient passed through unmasked (the backward of the activation forgotten)",
    ),
    dict(
        name="cat.gelu_grad_without_product_rule",
        bug_class="derivative",
        function="_activation_grad",
        old="dz = dy * (s + 2.0 * z * s * one_minus_s * du)",
        new="dz = dy * s",
        why="d (z * sigmoid(2u)) / dz taken as sigmoid(2u): the product rule forgotten",
    ),
    dict(
        name="cat.dbias_mean",
        bug_class="reduction",
        function="backward",
        old="ones = torch.ones((1, m), dtype=torch.float32, device=dy.device)",
        new="ones = torch.full((1, m), 1.0 / max(m, 1), dtype=torch.float32, device=dy.device)",
        why="dbias as the mean of dz over rows instead of the sum (the bias broadcast over M rows "
        "receives every row's gradient); invisible at M = 1",
    ),
    dict(
        name="cat.transpose_as_reshape",
        bug_class="layout",
        function="backward",
        old="da = _product(dz, b.t(), a.dtype)",
        new="da = _product(dz, b.reshape(b.shape[1], b.shape[0]), a.dtype)",
        why="b^T written as b.reshape(N, K), which reinterprets the elements instead of "
        "transposing them; the same only when K = 1 or N = 1",
    ),
    row_offset_int32(
        function="_matmul",
        old="rm = tl.program_id(0).to(tl.int64) * BLOCK_M",
        new="rm = tl.program_id(0) * BLOCK_M",
        what="the row index of the tile left in int32 (rm * stride_am and rm * N computed in int32)",
    ),
]

register_catalog("matmul", kernel=KERNEL, module=MODULE, entries=CATALOG)
