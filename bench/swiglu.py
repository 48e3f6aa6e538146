"""SwiGLU benchmark, silu(a) * b: the project's kernel against torch, torch.compile and Liger.

Signature of every implementation: ``f(a[M, N], b[M, N]) -> y[M, N]``.
Minimal bytes moved (e = element size): forward reads a and b and writes y, 3*M*N*e;
forward+backward adds reading a, b, dy and writing da, db, in all 8*M*N*e. At 32768x4096 bf16
(a 4096-wide MLP slice; Llama's 14336 intermediate has the same per-element cost) that is
805 MB and 2147 MB: about 189 us and 505 us at a 4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

# (M, N, dtype, kept by --quick)
SHAPES = [(128, 257, torch.float32, True), (32768, 4096, torch.bfloat16, False)]


def torch_swiglu(a, b):
    return F.silu(a) * b


def _make(m: int, n: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        a, b, dy = draw.normal((m, n)), draw.normal((m, n)), draw.normal((m, n))
        return BenchInputs(args=(a, b), grad_wrt=(0, 1), upstream=dy)

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda m, n, e: {"forward": 3 * m * n * e, "forward+backward": 8 * m * n * e})


def _liger_swiglu(function, a, b):
    # Liger 0.8.5: forward(ctx, a, b, gate_multiplier=1.0, down_multiplier=1.0); its backward
    # writes the gradients into a and b's storage (inputs are fresh per run)
    return function.apply(a, b)


def implementations() -> dict:
    from kernels.swiglu import swiglu

    return {
        "triton_swiglu (project)": swiglu,
        "torch F.silu(a) * b": torch_swiglu,
        "torch.compile(F.silu(a) * b)": compiled(torch_swiglu),
        "liger SiLUMul": liger_column("liger_kernel.ops.swiglu", "LigerSiLUMulFunction", _liger_swiglu),
    }
