"""The ``add_rmsnorm`` op: the fused residual add + RMSNorm of transformer blocks (vLLM's
``fused_add_rms_norm``, Liger-Kernel's and SGLang's fused add RMSNorm):
h = x + residual, the new residual stream, and y = h / sqrt(mean(h^2) + eps) * gamma over the
rows of x[M, N].

Kernel signature: ``f(x[M, N], residual[M, N], gamma[N], eps: float) -> (y[M, N], h[M, N])``, a
tuple, both in x's dtype (residual and gamma of the same dtype), differentiable in x, residual and
gamma through both outputs (upstream gradients dy and dh). Checks: ``forward`` (y),
``forward_h`` (h), dx, dresidual, dgamma, plus the common ones (output_meta for y and h each).

Contract of h: it is x + residual rounded once to x's dtype (a stored h of another dtype fails
output_meta). y may be computed from the fp32 sum or from h as stored (rounded), and the
backward likewise, but the backward is the gradient at one h: its 1/rms and the h beside it
must come from the same h. The two terms of dx cancel (at N = 1, r u (1 - h^2 r^2) =
r u eps / (h^2 + eps)), so the forward's 1/rms of the fp32 h next to the rounded h leaves a
difference of roundings where the result is tiny.

Error model (harness.compare.rounding): per output and gradient, twice the spread of the float64
reference when x, residual, gamma, dy and dh are each rounded within the input dtype, plus eight
fp32 roundings of the terms (oracles.add_rmsnorm: |x| + |residual| for h, dh plus RMSNorm's
terms of h for dx and dresidual), plus the output's rounding, plus what computing from the
rounded h may add: one unit roundoff of the input dtype times the first-order worst-case change
of each result when every element of h moves by a relative rounding
(``rounded_terms``: oracles.add_rmsnorm.add_rmsnorm_rounded_h; 0 for h itself, and negligible in
fp32). The random-sign spread alone does not bound that: dgamma sums h's rounding errors over
rows, where they may align while the spread's random signs cancel; a row with an infinite
element (1/rms = 0) adds exactly 0 there. A stored h off by more than
its own rounding (a missing or doubled residual, h written before the add) is outside all of it.
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.add_rmsnorm import add_rmsnorm_magnitudes, add_rmsnorm_reference, add_rmsnorm_rounded_h
from harness.ops import values

register_op(OpDecl(
    name="add_rmsnorm",
    signature="f(x[M, N], residual[M, N], gamma[N], eps: float) -> (y[M, N], h[M, N])",
    inputs=(Tensor("x", "M, N"), Tensor("residual", "M, N"), Tensor("gamma", "N", values="gain"),
            Scalar("eps", (1e-6, 1e-5, 1e-12, 0.1))),
    output={"y": "M, N", "h": "M, N"},
    reference=add_rmsnorm_reference,
    terms=add_rmsnorm_magnitudes,
    rounded_terms=add_rmsnorm_rounded_h,  # h kept in x's dtype and computed from (module docstring)
    reduces="N",
    value_kinds=values.ROW_KINDS,
    doc=__doc__,
))
