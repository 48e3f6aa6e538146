"""The ``softmax_masked`` op: y = softmax(scale * x + mask) along the last dimension of x[M, N],
the fused scale-and-mask softmax of attention implementations (Megatron's
scaled_masked_softmax, an additive attention mask).

Kernel signature: ``f(x[M, N], mask[M, N], scale: float) -> y[M, N]``, y in x's dtype,
differentiable in x (the mask is a constant); x and the mask also ``[..., N]`` (leading dims, as
``softmax``). The mask holds 0 where kept and -inf or the
dtype's most negative value where masked (harness.ops.values.additive_mask), every row keeping an
entry; row 0 is a causal prefix, a single kept entry. Checks: forward, dx, plus the common ones.

Error model (harness.compare.rounding): twice the spread of the float64 reference and its
gradient when x, the mask and dy are rounded within the input dtype, plus eight fp32 roundings
of the terms (oracles.softmax_masked: the exponent carries roundings of |scale x| and of the
shift by the row max; each p > 0 also carries the dtype's smallest normal, as in ``softmax``),
plus the output's rounding. A masked entry must come out exactly 0 and a
row with one kept entry exactly 1; a kernel that adds the mask after the max shift, scales the
mask, or forgets it fails there.
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.softmax_masked import softmax_masked_magnitudes, softmax_masked_reference
from harness.ops import row_kinds, values

register_op(OpDecl(
    name="softmax_masked",
    signature="f(x[M, N], mask[M, N], scale: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("mask", "M, N", values="mask", differentiable=False),
            Scalar("scale", (0.125, 1.0, 3.0))),
    output="M, N",
    leading="M",  # x and mask[..., N], as softmax: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=softmax_masked_reference,
    terms=softmax_masked_magnitudes,
    reduces="N",
    value_kinds=("normal", "tiny", "mixed_scale") + row_kinds.LOGITS,
    doc=__doc__,
))
