"""Liger-Kernel's cross-entropy as an outside kernel: differential testing of a third-party
implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op cross_entropy --plugin examples/plugins/liger_cross_entropy.py --select liger_cross_entropy

Without liger-kernel this plugin registers nothing (and prints nothing).

Liger's deliberate choice is declared, so it is reported as waived (with the reason), not as a
failure, and a choice Liger drops later shows up as a stale waiver:
- every row ignored: the loss is 0 where torch's mean cross-entropy is NaN (``all_ignored``).
Not waived: Liger's forward stores the gradient into the logits' storage when they require
grad (its memory saving, stated in liger_kernel/ops/cross_entropy.py); if the harness sees the
logits changed, that stays a failure for the lead to judge, since callers that reuse the logits
after the loss get wrong values.
``liger_cross_entropy_contiguous`` is the same function narrowed to contiguous fp32 and bf16 logits,
with the in-place gradient declared: the carrier of `mutate --mutate-module
liger_kernel.ops.cross_entropy`. Left out, each a finding the unrestricted kernel keeps reporting
(docs/findings.md): transposed logits (dlogits wrong), and fp16, where the forward rounds the unscaled
gradient p / n_non_ignore into the fp16 logits before the backward multiplies it by grad_output,
so entries in fp16's subnormal range (below 6.1e-5) keep only steps of 2^-24 that the upstream
gradient then magnifies (a loss scale of 1024 turns them into steps of 6e-5).
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
from _carrier import narrowed  # noqa: E402

try:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
except ImportError:  # not installed: nothing to verify
    LigerCrossEntropyFunction = None

if LigerCrossEntropyFunction is not None:

    @register_kernel(
        "cross_entropy",
        name="liger_cross_entropy",
        contract=Contract(
            dtypes=(torch.float32, torch.float16, torch.bfloat16),
            waive={"all_ignored": "returns 0 by design when every row is ignored (torch: NaN)"},
        ),
        description="Liger-Kernel's LigerCrossEntropyFunction (third party)",
    )
    def liger_cross_entropy(logits, target, ignore_index=-100):
        # Liger 0.8.5: forward(ctx, _input, target, weight, ignore_index, ...) -> (loss, z_loss, ...)
        out = LigerCrossEntropyFunction.apply(logits, target, None, ignore_index)
        return out[0] if isinstance(out, tuple) else out

    register_kernel(
        "cross_entropy",
        name="liger_cross_entropy_contiguous",
        contract=Contract(
            dtypes=(torch.float32, torch.bfloat16),
            contiguous=True,
            waive={"all_ignored": "returns 0 by design when every row is ignored (torch: NaN)",
                   "inputs_unchanged": "the forward stores the gradient into the logits' storage (Liger's memory saving)"},
        ),
        description="Liger-Kernel's LigerCrossEntropyFunction on contiguous fp32/bf16 logits (library-mutation carrier)",
    )(narrowed(liger_cross_entropy, dtypes=(torch.float32, torch.bfloat16), contiguous=True))
