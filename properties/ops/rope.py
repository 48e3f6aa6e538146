"""The ``rope`` op: rotary position embedding of x[B, S, H, D] by the angles of positions
offset .. offset + S - 1, read from tables cos[P, D/2] and sin[P, D/2] (oracles.rope has the formula).

Kernel signature: ``f(x[B, S, H, D], cos[P, R], sin[P, R], offset: int, interleaved: int) ->
y[B, S, H, D]`` with D = 2 R and P >= offset + S; y in x's dtype, differentiable in x (cos and
sin are tables, not differentiated). ``interleaved`` 0 rotates the halves (x[..., i],
x[..., i + R]: GPT-NeoX, Llama), 1 the neighbours (x[..., 2i], x[..., 2i + 1]: GPT-J), as
flash-attn's ``apply_rotary_emb(x, cos, sin, interleaved, seqlen_offsets)``. Checks: forward, dx,
plus the common ones.

Sizes: D and P are derived (``OpDecl.derived``): D = 2 R, so the floor's R = 1, 3, 17, 65 give the
head dims 2, 6, 34, 130 beside the powers of two; P = S + 40, a table longer than the positions
it serves (offset 37 reads rows 37 .. S + 36, and a kernel that takes the last S rows, or ignores
the offset, reads others). The offsets are three (0: prefill, 1, 37: decode), so the floor's turn
of scalars meets each with both conventions. cos and sin hold N(0, 1) values rather than true
cosines: the op is linear in them and a sign or table slip shows more plainly.

Error model (harness.compare.rounding): per element, twice the spread of the float64 reference
and its gradient when x, cos, sin and dy are rounded within the input dtype, plus fp32 roundings
of the two products each element adds or cancels (oracles.rope's magnitudes), plus the output's
rounding. Nothing is summed beyond the pair (no ``reduces``).
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.rope import rope_backward, rope_magnitudes, rope_reference
from harness.ops import values

OFFSETS = (0, 1, 37)
TABLE_EXTRA = 40  # P - S: more than the largest offset, so every table has rows past the last position read

register_op(OpDecl(
    name="rope",
    signature="f(x[B, S, H, D], cos[P, R], sin[P, R], offset: int, interleaved: int) -> y[B, S, H, D]",
    inputs=(Tensor("x", "B, S, H, D"), Tensor("cos", "P, R", values="normal", differentiable=False),
            Tensor("sin", "P, R", values="normal", differentiable=False),
            Scalar("offset", OFFSETS), Scalar("interleaved", (0, 1))),
    output="B, S, H, D",
    reference=rope_reference,
    backward=rope_backward,
    terms=rope_magnitudes,
    value_kinds=values.ROW_KINDS,
    derived={"D": lambda s: 2 * s["R"], "P": lambda s: s["S"] + TABLE_EXTRA},
    special_sizes={"R": (3,)},
    doc=__doc__,
))
