"""The ``softmax`` op: y = exp(x - max) / sum(exp(x - max)) along the last dimension of x[M, N].

Kernel signature: ``f(x[M, N]) -> y[M, N]``, y in x's dtype, differentiable in x. Checks:
forward, dx, plus the common ones.

Error model (harness.compare.rounding): per element, twice the spread of the float64 softmax and
its gradient when x - max (``shift_by_max``: the max is one of the row's values, so a kernel that
subtracts it first computes x - max exactly near the max) and dy are rounded within the input
dtype, plus eight fp32 roundings of the terms (oracles.softmax's magnitudes: exp(x - max)
inherits a rounding of |x - max|, and dx = p (dy - sum p dy) cancels; each p > 0 also carries
the dtype's smallest normal, since a kernel that keeps p in fp16 rounds it to the subnormals'
spacing below 6.1e-5), plus the output's rounding. Large logits (100 + 10 N(0, 1)) get an allowance in proportion to |x - max|; a kernel
without the max subtraction overflows to inf / inf = NaN there. A fully masked row (-1e9, or
-3e4 in fp16) is a row of zeros after the shift and must come out uniform, 1/N: padding lanes
read as -1e9 instead of -inf (1/(N + pad)) and y = exp(x - logsumexp) (log N rounded away at
-1e9) fail there. Entries of -inf (``neg_inf``: masked positions, runs longer than a block)
give exactly 0 and must not turn the row into NaN.
"""

from harness.registry.declare import OpDecl, Tensor
from harness.registry.registry import register_op
from oracles.softmax import softmax_backward_magnitudes, softmax_forward_magnitudes, softmax_reference
from harness.ops import row_kinds, values

register_op(OpDecl(
    name="softmax",
    signature="f(x[M, N]) -> y[M, N]",
    inputs=(Tensor("x", "M, N"),),
    output="M, N",
    leading="M",  # x[..., N]: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=softmax_reference,
    terms=lambda x, dy, tiny=0.0: (softmax_forward_magnitudes(x, tiny), softmax_backward_magnitudes(x, dy, tiny)),
    reduces="N",
    shift_by_max=("x",),
    value_kinds=values.ROW_KINDS + row_kinds.LOGITS,
    doc=__doc__,
))
