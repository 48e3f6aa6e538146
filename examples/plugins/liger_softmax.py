"""Liger-Kernel's softmax (over the last dimension) as an outside kernel: differential testing
of a third-party implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op softmax --plugin examples/plugins/liger_softmax.py --select liger_softmax

Without liger-kernel this plugin registers nothing (and prints nothing).
No deliberate deviation of Liger's softmax from torch.softmax is documented, so nothing is waived.
"""

import torch

from harness import Contract, register_kernel

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
