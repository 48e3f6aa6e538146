"""The ``swiglu`` op: y = silu(a) * b = a * sigmoid(a) * b, elementwise over a[M, N] and b[M, N].

Kernel signature: ``f(a[M, N], b[M, N]) -> y[M, N]``, y in a's dtype, differentiable in a and
b. Checks: forward, da, db, plus the common ones.

Error model (harness.compare.rounding): per element, twice the spread of the float64 reference
and its gradients when a, b and dy are rounded within the input dtype, plus eight fp32
roundings of the terms, plus the output's rounding. The terms: |y| for the forward (a plain
product); silu's derivative s + a s (1 - s) cancels near a = -1.28 (oracles.swiglu's
magnitudes), and 1 - s cancels for large a, where the rounding of s (|a| s in units of the
result's terms) is all that is left; and sigmoid(a) itself may be 0 in fp32 for a < -88.7 (exp(-a) overflows, while
the true value is below fp32's normal range), an absolute error of 2^-126 that a and b scale:
FLUSH = 2^-126 / 2^-24 in units of the terms. Gate extremes (20 N(0, 1)) saturate sigmoid both
ways: a kernel computing exp(-a) in fp16 overflows for a < -11, and one using sigmoid(b) is off
by O(1). Gradients use the oracle's explicit formulas, which keep inf where autograd through
a * sigmoid(a) * b makes 0 * inf = NaN (b = inf at a = 0: da = dy * b / 2 = inf).
"""

import torch

from harness.registry.declare import OpDecl, Tensor
from harness.registry.registry import register_op
from oracles.swiglu import swiglu_backward, swiglu_backward_magnitudes, swiglu_reference
from harness.ops import row_kinds, values

FLUSH = 2.0**-102


def terms(a: torch.Tensor, b: torch.Tensor, dy: torch.Tensor):
    da_terms, db_terms = swiglu_backward_magnitudes(a, b, dy)
    s = torch.sigmoid(a)
    return (
        (a * b).abs() * (s + FLUSH),
        da_terms + (dy * b).abs() * (a.abs() * s + (1.0 + a.abs()) * FLUSH),
        db_terms + (dy * a).abs() * FLUSH,
    )


register_op(OpDecl(
    name="swiglu",
    signature="f(a[M, N], b[M, N]) -> y[M, N]",
    inputs=(Tensor("a", "M, N"), Tensor("b", "M, N")),
    output="M, N",
    leading="M",  # x[..., N]: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=swiglu_reference,
    backward=swiglu_backward,
    terms=terms,
    value_kinds=values.ROW_KINDS + row_kinds.GATES,
    doc=__doc__,
))
