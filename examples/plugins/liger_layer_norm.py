"""Liger-Kernel's LayerNorm as an outside kernel: differential testing of a third-party
implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op layer_norm --plugin examples/plugins/liger_layer_norm.py --select liger_layer_norm

Without liger-kernel this plugin registers nothing (and prints nothing): verify then runs the
project's kernels only, and --select liger_layer_norm matches no kernel.
No deliberate deviation of Liger's LayerNorm from F.layer_norm is documented, so nothing is waived.
"""

import torch

from harness import Contract, register_kernel

try:
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
except ImportError:  # not installed: nothing to verify
    LigerLayerNormFunction = None

if LigerLayerNormFunction is not None:

    @register_kernel(
        "layer_norm",
        name="liger_layer_norm",
        contract=Contract(dtypes=(torch.float32, torch.float16, torch.bfloat16)),
        description="Liger-Kernel's LigerLayerNormFunction (third party)",
    )
    def liger_layer_norm(x, weight, bias, eps):
        # Liger 0.8.5: forward(ctx, X, W, B, eps)
        return LigerLayerNormFunction.apply(x, weight, bias, eps)
