"""The ``cross_entropy`` op: F.cross_entropy(logits, target, ignore_index=ignore_index).

Kernel signature: ``f(logits[N, V], target[N] int64, ignore_index: int = -100) -> scalar`` in
logits' dtype: the mean of logsumexp(logits[i]) - logits[i, target[i]] over the rows whose
target is not ignore_index, NaN when every row is ignored (as torch); differentiable in logits.
Checks: loss (recorded as ``all_ignored`` when every row is ignored: a kernel returning 0
there fails under that name), dlogits, plus the common ones. ignore_index may be a valid class
(0): rows with that target are ignored, the others never draw it.

Error model (harness.compare.rounding): twice the spread of the float64 loss and gradient when
logits and the upstream gradient are rounded within the input dtype, plus eight fp32 roundings
of the terms (oracles.cross_entropy's magnitudes: p_t - 1 cancels when the target dominates, and
p_t ~ 1 rounds in fp32 while perturbing the logits barely moves the result), plus the output's
rounding. The loss of a confident row cancels logsumexp against the target logit; a logit
rounded by u * |x| moves the loss by up to that much, so large logits (100 + 10 N(0, 1)) and
masked rows (-1e9; -3e4 in fp16) get an allowance in proportion, and averaging over all rows
instead of the valid ones is off by the ignored fraction. Logits of -inf (``neg_inf``: masked
classes, never a label) give p = 0 exactly and must not turn a row into NaN (an online
logsumexp whose first block holds only -inf does). The plain rounding, not ``shift_by_max``: a
kernel that forms m + log(s) before subtracting the target logit loses log(s) only on rows of
-1e9, which no model's logits hold.
"""

from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.cross_entropy import cross_entropy_magnitudes, cross_entropy_reference
from harness.ops import row_kinds

register_op(OpDecl(
    name="cross_entropy",
    signature="f(logits[N, V], target[N] int64, ignore_index: int = -100) -> scalar",
    inputs=(Tensor("logits", "N, V"), Index("target", "N", high="V", ignore="ignore_index"),
            Scalar("ignore_index", (-100, -1, 0))),
    output="",
    reference=cross_entropy_reference,
    terms=lambda logits, target, ignore_index, dy: cross_entropy_magnitudes(logits, target, dy, ignore_index),
    reduces=("N", "V"),
    value_kinds=("normal", "tiny", "mixed_scale", "nonfinite") + row_kinds.LOGITS,
    forward_check="loss",
    doc=__doc__,
))
