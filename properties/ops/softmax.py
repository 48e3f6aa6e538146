"""The ``softmax`` op: y = exp(x - max) / sum(exp(x - max)) along the last dimension of x[M, N].

Kernel signature: ``f(x[M, N]) -> y[M, N]``, y in x's dtype, differentiable in x. Checks:
forward, dx, plus the common ones.

Error model (harness.compare.rounding): per element, twice the spread of the float64 softmax and
its gradient when x and dy are rounded within the input dtype, plus eight fp32 roundings of the
terms (oracles.softmax's magnitudes: exp(x - max) inherits a rounding of |x - max|, and
dx = p (dy - sum p dy) cancels), plus the output's rounding. A
logit x_j rounded by u * |x_j| moves p_j by about p_j * u * |x_j - sum_k p_k x_k|: large logits
(100 + 10 N(0, 1)) get a proportionally larger allowance, and a kernel without the max
subtraction still overflows to inf / inf = NaN there. Masked rows (-1e9, or -3e4 in fp16) and
ties (repeated maxima) have the same model.
"""

from harness.registry.declare import OpDecl, Tensor
from harness.registry.registry import register_op
from oracles.softmax import softmax_backward_magnitudes, softmax_forward_magnitudes, softmax_reference
from properties import row_kinds, values

register_op(OpDecl(
    name="softmax",
    signature="f(x[M, N]) -> y[M, N]",
    inputs=(Tensor("x", "M, N"),),
    output="M, N",
    reference=softmax_reference,
    terms=lambda x, dy: (softmax_forward_magnitudes(x), softmax_backward_magnitudes(x, dy)),
    reduces="N",
    value_kinds=values.ROW_KINDS + row_kinds.LOGITS,
    doc=__doc__,
))
