"""Liger-Kernel's SiLU-and-multiply (SwiGLU's silu(a) * b) as an outside kernel: differential
testing of a third-party implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op swiglu --plugin examples/plugins/liger_swiglu.py --select liger_swiglu

Without liger-kernel this plugin registers nothing (and prints nothing).
No deliberate deviation from F.silu(a) * b is documented, so nothing is waived (gate_multiplier
and down_multiplier keep their defaults of 1.0). Its backward stores da and db into the storage of
a and b (its memory saving): reported as a failure of ``inputs_unchanged`` here.
``liger_swiglu_bf16`` is the same function narrowed to bf16 inputs, where its values pass, with
that in-place backward declared: the carrier of `mutate --mutate-module liger_kernel.ops.swiglu`.
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
from _carrier import narrowed  # noqa: E402

try:
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
except ImportError:  # not installed: nothing to verify
    LigerSiLUMulFunction = None

if LigerSiLUMulFunction is not None:

    @register_kernel(
        "swiglu",
        name="liger_swiglu",
        # Liger raises past 65536 columns ("exceeds the recommended Triton blocksize"): a stated limit
        contract=Contract(dtypes=(torch.float32, torch.float16, torch.bfloat16), max_n=65536),
        description="Liger-Kernel's LigerSiLUMulFunction (third party)",
    )
    def liger_swiglu(a, b):
        # Liger 0.8.5: forward(ctx, a, b, gate_multiplier=1.0, down_multiplier=1.0)
        return LigerSiLUMulFunction.apply(a, b)

    register_kernel(
        "swiglu",
        name="liger_swiglu_bf16",
        contract=Contract(
            dtypes=(torch.bfloat16,),
            max_n=65536,
            waive={"inputs_unchanged": "the backward stores da and db into a's and b's storage (Liger's memory saving)"},
        ),
        description="Liger-Kernel's LigerSiLUMulFunction on bf16 inputs only (library-mutation carrier)",
    )(narrowed(liger_swiglu, dtypes=(torch.bfloat16,)))
