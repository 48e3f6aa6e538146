"""The ``rmsnorm_offset`` op: y = x / sqrt(mean(x^2) + eps) * (offset + gamma) over the rows of
x[M, N]: RMSNorm with the weight offset Gemma's checkpoints store (offset = 1: the weight is
kept as gamma - 1), and offset = 0, the plain form, for a kernel that takes the offset as an
argument (Liger-Kernel's ``offset``).

Kernel signature: ``f(x[M, N], gamma[N], eps: float, offset: float) -> y[M, N]`` with y in x's
dtype, differentiable in x and gamma (dgamma is the same sum as RMSNorm's: the offset is a
constant). Checks: forward, dx, dgamma, plus the common ones.

Error model (harness.compare.rounding): twice the spread of the float64 reference and its
gradients when x, gamma and dy are each rounded within the input dtype, plus eight fp32
roundings of the terms (oracles.rmsnorm's magnitudes with the weight offset + gamma), plus the
output's rounding. offset + gamma is formed in fp32 by a careful kernel; in bf16 it rounds
(offset + gamma), a rounding of up to twice the weight's own, which a case of large rows sees.
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.rmsnorm import rmsnorm_backward_magnitudes, rmsnorm_reference
from harness.ops import values

register_op(OpDecl(
    name="rmsnorm_offset",
    signature="f(x[M, N], gamma[N], eps: float, offset: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("gamma", "N", values="gain"), Scalar("eps", (1e-6, 1e-5, 1e-12, 0.1)),
            Scalar("offset", (1.0, 0.0))),
    output="M, N",
    reference=lambda x, gamma, eps, offset: rmsnorm_reference(x, gamma + offset, eps),
    terms=lambda x, gamma, eps, offset, dy: (None, *rmsnorm_backward_magnitudes(x, gamma + offset, dy, eps)),
    reduces="N",
    value_kinds=values.ROW_KINDS,
    doc=__doc__,
))
