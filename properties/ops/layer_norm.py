"""The ``layer_norm`` op: y = (x - mean) / sqrt(var + eps) * weight + bias over the rows of x[M, N].

Kernel signature: ``f(x[M, N], weight[N], bias[N], eps: float) -> y[M, N]``, the population
variance (1/N), weight, bias and y in x's dtype, differentiable in x, weight and bias. Checks:
forward, dx, dweight, dbias, plus the common ones.

Error model (harness.compare.rounding): per element, twice the spread of the float64 reference
and its gradients when x, weight, bias and dy are each rounded within the input dtype, plus
eight fp32 roundings of the terms the formulas cancel (oracles.layer_norm's magnitudes: the
centred row in units of the offset it cancels), plus the output's rounding. The spread is large exactly where the op is ill-conditioned: a row with a
large common offset (1e4 + N(0, 1)) moves its mean by ulps of 1e4, which 1/sqrt(var + eps)
scales up; constant rows (variance 0) amplify it by 1/sqrt(eps). A kernel that computes the
variance as E[x^2] - E[x]^2 in fp32 loses 1e8 * 6e-8 = 6 on such rows: far outside.
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.layer_norm import layer_norm_backward_magnitudes, layer_norm_forward_magnitudes, layer_norm_reference
from harness.ops import row_kinds, values

register_op(OpDecl(
    name="layer_norm",
    signature="f(x[M, N], weight[N], bias[N], eps: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("weight", "N", values="gain"), Tensor("bias", "N", values="normal"),
            Scalar("eps", (1e-5, 1e-6, 1e-12, 0.1))),
    output="M, N",
    leading="M",  # x[..., N]: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=layer_norm_reference,
    terms=lambda x, w, b, eps, dy: (
        layer_norm_forward_magnitudes(x, w, b, eps), *layer_norm_backward_magnitudes(x, w, b, eps, dy)),
    reduces="N",
    value_kinds=values.ROW_KINDS + row_kinds.NORMALISATION,
    doc=__doc__,
))
