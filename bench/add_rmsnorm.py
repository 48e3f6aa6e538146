"""Fused residual add + RMSNorm benchmark: the project's kernel against torch and Liger, at the
tutorial's shape and an LLM shape.

Signature of every implementation: ``f(x[M, N], residual[M, N], gamma[N], eps) -> (y, h)`` with
h = x + residual (in x's dtype) and y = rmsnorm(h) * gamma. forward+backward differentiates y
(the engine's first output) with respect to x, residual and gamma.
Minimal bytes moved (e = element size; the fp32 per-row 1/rms an implementation may save is
ignored): forward reads x, residual and gamma and writes y and h, (4*M*N + N)*e; the backward
reads h, dy and gamma and writes dh (x's and residual's gradient, one tensor) and dgamma, in all
(7*M*N + 3*N)*e. At 32768x4096 bf16 that is 1074 MB and 1879 MB: about 253 us and 442 us at a
4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

EPS = 1e-6
# (M, N, dtype, kept by --quick): the tutorial's benchmark shape, and one LLM layer's activations
SHAPES = [(128, 257, torch.float32, True), (32768, 4096, torch.bfloat16, False)]


def torch_reference(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, eps: float):
    """Plain torch: h in x's dtype, y computed in float32 (float64 for float64) from h, cast back."""
    h = x + residual
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    hf = h.to(work)
    r = torch.rsqrt(hf.square().mean(-1, keepdim=True) + eps)
    return (hf * r * gamma.to(work)).to(x.dtype), h


def torch_rms_norm(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, eps: float):
    h = x + residual
    return torch.nn.functional.rms_norm(h, (h.shape[-1],), gamma, eps), h


def _make(m: int, n: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        x, residual = draw.normal((m, n)), draw.normal((m, n))
        gamma = draw.normal(n, scale=0.5, shift=1.0)
        return BenchInputs(args=(x, residual, gamma, EPS), grad_wrt=(0, 1, 2), upstream=draw.normal((m, n)))

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda m, n, e: {"forward": (4 * m * n + n) * e,
                                                        "forward+backward": (7 * m * n + 3 * n) * e})


def _liger_add_rms_norm(function, x, residual, gamma, eps):
    # Liger's fused add + RMSNorm: forward(ctx, X, R, W, eps, offset=0.0, casting_mode="llama",
    # in_place=False) -> (Y, S), S = X + R; the column is skipped where Liger is not installed
    return function.apply(x, residual, gamma, eps)


def implementations() -> dict:
    from kernels.add_rmsnorm import add_rmsnorm

    return {
        "triton_add_rmsnorm (project)": add_rmsnorm,
        "torch reference (eager)": torch_reference,
        "torch add + F.rms_norm": torch_rms_norm,
        "torch.compile(reference)": compiled(torch_reference),
        "liger FusedAddRMSNorm": liger_column("liger_kernel.ops.fused_add_rms_norm", "LigerFusedAddRMSNormFunction",
                                             _liger_add_rms_norm),
    }
