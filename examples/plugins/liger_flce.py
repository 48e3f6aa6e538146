"""Liger-Kernel's fused linear cross-entropy as an outside kernel: differential testing of a
third-party implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op fused_linear_cross_entropy --plugin examples/plugins/liger_flce.py --select liger_flce

Runs on a GPU, and under the Triton interpreter on the CPU (small cases). Without
liger-kernel the plugin fails to import and verify says so (exit 2).

Liger's deliberate choices are declared, so they are reported as waived (with the reason) or
judged by the declared precision, not as failures, and a choice Liger drops later shows up as a
stale waiver:
- every row ignored: the loss is 0 where torch's mean cross-entropy is NaN (``all_ignored``);
- fp16/bf16 inputs: the loss comes back in float32, not the input dtype (``output_meta``);
- dW is accumulated with atomics on a GPU: not bitwise repeatable (``deterministic=False``);
- the logits are materialised in the input dtype before the softmax (``precision="input"``): on
  large fp16/bf16 logits dW is off by several roundings of that dtype (29% on one bf16 case),
  which a kernel with fp32 logits must not be, but which is Liger's design. The declaration
  allows 8 such roundings of the terms and no more: a loss beyond it still fails;
- V = 1 with fp16/bf16 inputs is outside the contract (``rule=one_class_low_precision``):
  cuBLAS raises CUBLAS_STATUS_INVALID_VALUE on that shape, so the kernel below rejects it
  with a ValueError before calling Liger, as a kernel must reject what it does not handle.
Without these declarations the same function fails those cases; ``liger_flce_fp32`` is the
same function on fp32 inputs only: the carrier of
`mutate --mutate-module liger_kernel.ops.fused_linear_cross_entropy`.
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
from _carrier import narrowed  # noqa: E402

try:
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
except ImportError as exc:  # the loader turns this into a one-line usage error
    raise ImportError(f"liger-kernel is not installed ({exc}); pip install liger-kernel to verify it") from None


def one_class_low_precision(x, weight, *rest):
    """Why (x, weight) is outside Liger's contract, or None: V = 1 in fp16/bf16."""
    if weight.shape[0] == 1 and x.dtype in (torch.float16, torch.bfloat16):
        return "V = 1 with fp16/bf16 inputs (cuBLAS rejects the shape with CUBLAS_STATUS_INVALID_VALUE)"
    return None


def _liger(x, weight, target, ignore_index=-100):
    # positional (input, weight, target, bias, ce_weight, ignore_index); newer versions return a tuple
    out = LigerFusedLinearCrossEntropyFunction.apply(x, weight, target, None, None, ignore_index)
    return out[0] if isinstance(out, tuple) else out


@register_kernel(
    "fused_linear_cross_entropy",
    name="liger_flce",
    contract=Contract(
        dtypes=(torch.float32, torch.float16, torch.bfloat16),
        max_n=65536,
        deterministic=False,
        precision="input",
        rule=one_class_low_precision,
        waive={
            "all_ignored": "returns 0 by design when every row is ignored (torch: NaN)",
            "output_meta": "returns the loss in float32 for fp16/bf16 inputs by design",
        },
    ),
    description="Liger-Kernel's LigerFusedLinearCrossEntropyFunction (third party), its choices declared",
)
def liger_flce(x, weight, target, ignore_index=-100):
    why = one_class_low_precision(x, weight)
    if why is not None:
        raise ValueError(f"liger_flce: {why}")
    return _liger(x, weight, target, ignore_index)


register_kernel(
    "fused_linear_cross_entropy",
    name="liger_flce_fp32",
    contract=Contract(
        dtypes=(torch.float32,),
        max_n=65536,
        deterministic=False,
        waive={"all_ignored": "returns 0 by design when every row is ignored (torch: NaN)"},
    ),
    description="Liger-Kernel's LigerFusedLinearCrossEntropyFunction on fp32 inputs only (library-mutation carrier)",
)(narrowed(_liger, dtypes=(torch.float32,)))
