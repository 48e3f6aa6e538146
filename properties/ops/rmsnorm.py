"""The ``rmsnorm`` op: y = x / sqrt(mean(x^2) + eps) * gamma over the rows of x[M, N].

Kernel signature: ``f(x[M, N], gamma[N], eps: float) -> y[M, N]`` with ``y.dtype == x.dtype``,
differentiable in x and gamma. Checks: forward, dx, dgamma, plus the common ones. The floor is
the derived one (harness.ops.derive: each dim at the floor sizes, every layout, mixed layouts of
x, gamma and dy, on CUDA the index-width cases of x, gamma and dy) plus shapes by purpose:
one element (1 x 1); N = 8192, beyond the tutorial's N <= 4096; the tutorial's benchmark shape 128 x 257; on CUDA
32769 rows of 97, past the 32768 rows where a library may switch to a multi-row kernel
(Liger-Kernel's _block_rms_norm_* at >= 32768 rows of <= 256 columns).

Error model (harness.compare.rounding): twice the spread of the float64 reference and its
gradients (oracles.rmsnorm's explicit formulas) when x, gamma and dy are each rounded within
the input dtype, plus (8 + 2 sqrt(N)) fp32 roundings of the terms the formulas sum or cancel
(oracles.rmsnorm's magnitudes: |r u| + |x r^3 mean(u x)| for dx, the sum over rows of
|dy x r| for dgamma), plus the output's rounding. RMSNorm is well conditioned in x (the
spread is a few ulps of y) except where mean(x^2) is near eps: a zero or tiny row with
eps = 1e-12 moves by the full rounding of x over sqrt(eps).
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference
from harness.ops import values

register_op(OpDecl(
    name="rmsnorm",
    signature="f(x[M, N], gamma[N], eps: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("gamma", "N", values="gain"), Scalar("eps", (1e-6, 1e-5, 1e-12, 0.1), positive=True)),
    output="M, N",
    reference=rmsnorm_reference,
    backward=lambda x, gamma, eps, dy: rmsnorm_backward(x, gamma, dy, eps),
    terms=lambda x, gamma, eps, dy: (None, *rmsnorm_backward_magnitudes(x, gamma, dy, eps)),
    reduces="N",
    value_kinds=values.ROW_KINDS,
    special_sizes={"N": (8192,)},
    floor_shapes=({"M": 1, "N": 1}, {"M": 128, "N": 257}),
    floor_shapes_gpu=({"M": 32769, "N": 97},),
    doc=__doc__,
))
