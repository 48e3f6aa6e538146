"""Liger-Kernel's RMSNorm in its two casting modes as outside kernels: differential testing of
a third-party implementation against the float64 oracle, through the public plugin API.

    pip install liger-kernel            # not a dependency of the harness
    python -m harness verify --op rmsnorm --plugin examples/plugins/liger_rmsnorm.py --select 'liger_rmsnorm_*'

- ``liger_rmsnorm_llama``: casting_mode="llama" (Llama's order: x * rstd is cast to the input
  dtype before the multiplication by the weight);
- ``liger_rmsnorm_gemma``: casting_mode="gemma" (everything in fp32, one cast at the end). The
  offset stays 0.0: Gemma's 1 + weight is not this op's formula.
Both keep Liger's default in_place=True (what models use: dx is written into dy's storage, which
``inputs_unchanged`` reports). ``liger_rmsnorm_gemma_out_of_place`` passes in_place=False (the
argument Liger documents for callers that reuse dy): the carrier of
`mutate --mutate-module liger_kernel.ops.rms_norm`.
``liger_rmsnorm_llama_declared`` is the llama mode with its convention declared,
``Contract(precision="input")`` (the normalised row is rounded to the input dtype by design), and
in_place=False: it is judged against 8 roundings of the input dtype on the terms, so it passes
if it reproduces Llama's casting faithfully and still fails if it loses precision beyond it.
Without liger-kernel this plugin registers nothing (and prints nothing). Nothing is waived: no
deviation from y = x / sqrt(mean(x^2) + eps) * gamma is documented for either mode.
"""

import torch

from harness import Contract, register_kernel

try:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
except ImportError:  # not installed: nothing to verify
    LigerRMSNormFunction = None

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _register(mode: str, in_place: bool = True, precision: str = "float32") -> None:
    def liger_rmsnorm(x, gamma, eps=1e-6):
        # Liger 0.8.5: forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None)
        return LigerRMSNormFunction.apply(x, gamma, eps, 0.0, mode, in_place)

    register_kernel(
        "rmsnorm",
        name=f"liger_rmsnorm_{mode}" + ("_declared" if precision != "float32" else "" if in_place else "_out_of_place"),
        contract=Contract(dtypes=DTYPES, precision=precision),
        description=f"Liger-Kernel's LigerRMSNormFunction, casting_mode={mode!r}, in_place={in_place} (third party)",
    )(liger_rmsnorm)


if LigerRMSNormFunction is not None:
    for _mode in ("llama", "gemma"):
        _register(_mode)
    _register("gemma", in_place=False)
    _register("llama", in_place=False, precision="input")
