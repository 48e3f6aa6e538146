"""The ``cross_entropy_rows`` op: F.cross_entropy(logits, target, ignore_index=ignore_index,
label_smoothing=label_smoothing, reduction="none"), the per-token loss training loops weight or
mask themselves.

Kernel signature: ``f(logits[N, V], target[N] int64, ignore_index: int, label_smoothing: float)
-> loss[N]`` in logits' dtype, 0 on ignored rows (as torch, also when every row is ignored),
differentiable in logits; the upstream gradient is a vector (each row its own weight), so a
kernel that sums it, or applies row 0's to every row, fails. Checks: loss (``all_ignored`` when
every row is ignored), dlogits, plus the common ones.

Error model (harness.compare.rounding): twice the spread of the float64 losses and gradient when
the logits and the upstream gradient are rounded within the input dtype, plus eight fp32
roundings of the terms (oracles.cross_entropy_rows: lse - x_t cancels for a confident row, the
smoothing sum cancels ls * (|lse| + mean |x|)), plus the output's rounding.
"""

from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.cross_entropy_rows import cross_entropy_rows_magnitudes, cross_entropy_rows_reference
from harness.ops import row_kinds

register_op(OpDecl(
    name="cross_entropy_rows",
    signature="f(logits[N, V], target[N] int64, ignore_index: int, label_smoothing: float) -> loss[N]",
    inputs=(Tensor("logits", "N, V"), Index("target", "N", high="V", ignore="ignore_index"),
            Scalar("ignore_index", (-100, -1, 0)), Scalar("label_smoothing", (0.0, 0.1))),
    output="N",
    reference=cross_entropy_rows_reference,
    terms=lambda logits, target, ignore_index, ls, dy: cross_entropy_rows_magnitudes(logits, target, dy, ignore_index, ls),
    reduces="V",
    value_kinds=("normal", "tiny", "mixed_scale", "nonfinite") + row_kinds.LOGITS,
    forward_check="loss",
    doc=__doc__,
))
