"""The ``matmul`` op: y = act(a @ b + bias) for a[M, K], b[K, N], bias[N] (oracles.matmul has
the formulas), act one of none, relu, gelu_tanh.

Kernel signature: ``f(a[M, K], b[K, N], bias[N], activation: str) -> y[M, N]``, y in a's dtype,
differentiable in a, b and bias. Checks: forward, da, db, dbias, plus the common ones. The
layouts give transposed operands (a = a_t.T, b = b_t.T views) and the upstream gradient in
another layout than either.

Error model (harness.compare.rounding): per element, twice the spread of the float64 reference
and its gradients when a, b, bias and dy are each rounded within the input dtype, plus
fp32 roundings of the terms the products sum (oracles.matmul's magnitudes: |a| @ |b| + |bias|,
times the activation's largest slope), growing as 8 + 2 sqrt(K) roundings with the reduced
length K (``reduces``; the weight gradient db sums over M, dbias over M: the gradients of inputs
without the M dim get M, harness.ops.derive), plus the output's rounding. fp32 inputs are held to
fp32 products: a tl.dot in TF32 (10-bit mantissa, the GPU default for fp32) is off by about 2^-11
of its terms, thousands of fp32 roundings, and fails unless the kernel declares it
(``Contract(precision=("float32", N))``); fp16 and bf16 inputs with fp32 accumulation pass.
"""

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.matmul import ACTIVATIONS, matmul_backward, matmul_magnitudes, matmul_reference
from harness.ops import values

register_op(OpDecl(
    name="matmul",
    signature="f(a[M, K], b[K, N], bias[N], activation: str) -> y[M, N]",
    inputs=(Tensor("a", "M, K"), Tensor("b", "K, N"), Tensor("bias", "N", values="normal"),
            Scalar("activation", ACTIVATIONS)),
    output="M, N",
    reference=matmul_reference,
    backward=matmul_backward,
    terms=matmul_magnitudes,
    reduces="K",
    value_kinds=values.ROW_KINDS,
    doc=__doc__,
))
