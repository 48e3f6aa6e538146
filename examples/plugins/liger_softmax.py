"""Liger-Kernel's softmax (over the last dimension) as an outside kernel: differential testing
of a third-party implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op softmax --plugin examples/plugins/liger_softmax.py --select liger_softmax

Without liger-kernel this plugin registers nothing (and prints nothing).
No deliberate deviation of Liger's softmax from torch.softmax is documented, so nothing is waived.
``liger_softmax_fp32`` is the same function narrowed to fp32 inputs, where it passes: the carrier
of `mutate --mutate-module liger_kernel.ops.softmax` (its fp16/bf16 dx fails, see docs/findings.md).
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
from _carrier import narrowed  # noqa: E402

try:
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
except ImportError:  # not installed: nothing to verify
    LigerSoftmaxFunction = None

if LigerSoftmaxFunction is not None:

    @register_kernel(
        "softmax",
        name="liger_softmax",
        contract=Contract(dtypes=(torch.float32, torch.float16, torch.bfloat16)),
        description="Liger-Kernel's LigerSoftmaxFunction (third party)",
    )
    def liger_softmax(x):
        # Liger 0.8.5: forward(ctx, input_)
        return LigerSoftmaxFunction.apply(x)

    register_kernel(
        "softmax",
        name="liger_softmax_fp32",
        contract=Contract(dtypes=(torch.float32,), max_n=65536),  # declared, so that N = 65537 is out of contract
        description="Liger-Kernel's LigerSoftmaxFunction on fp32 inputs of at most 65536 columns (library-mutation carrier)",
    )(narrowed(liger_softmax, dtypes=(torch.float32,), max_last_dim=65536))  # 0.8.5 raises RuntimeError past 65536
