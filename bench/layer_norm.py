"""LayerNorm benchmark: the project's kernel against torch, torch.compile and Liger.

Signature of every implementation: ``f(x[M, N], weight[N], bias[N], eps) -> y[M, N]``.
Minimal bytes moved (e = element size; the fp32 per-row mean and 1/std an implementation may
save are ignored): forward reads x, weight, bias and writes y, (2*M*N + 2*N)*e;
forward+backward adds reading x, dy, weight and writing dx, dweight, dbias, in all
(5*M*N + 5*N)*e. At 32768x4096 bf16 that is 537 MB and 1342 MB: about 126 us and 316 us at a
4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

EPS = 1e-5
# (M, N, dtype, kept by --quick): a small odd row length, and one LLM layer's activations
SHAPES = [(128, 257, torch.float32, True), (32768, 4096, torch.bfloat16, False)]


def torch_layer_norm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _make(m: int, n: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        x = draw.normal((m, n))
        weight = draw.normal(n, scale=0.5, shift=1.0)
        bias = draw.normal(n, scale=0.1)
        return BenchInputs(args=(x, weight, bias, EPS), grad_wrt=(0, 1, 2), upstream=draw.normal((m, n)))

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda m, n, e: {"forward": (2 * m * n + 2 * n) * e,
                                                        "forward+backward": (5 * m * n + 5 * n) * e})


def _liger_layer_norm(function, x, weight, bias, eps):
    # Liger 0.8.5: forward(ctx, X, W, B, eps)
    return function.apply(x, weight, bias, eps)


def implementations() -> dict:
    from kernels.layer_norm import layer_norm

    return {
        "triton_layer_norm (project)": layer_norm,
        "torch F.layer_norm": torch_layer_norm,
        "torch.compile(F.layer_norm)": compiled(torch_layer_norm),
        "liger LayerNorm": liger_column("liger_kernel.ops.layer_norm", "LigerLayerNormFunction", _liger_layer_norm),
    }
