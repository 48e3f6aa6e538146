"""Softmax benchmark (over the last dimension): the project's kernel against torch,
torch.compile and Liger.

Signature of every implementation: ``f(x[M, N]) -> y[M, N]``.
Minimal bytes moved (e = element size; per-row statistics ignored): forward reads x and writes
y, 2*M*N*e; forward+backward adds reading y (or x) and dy and writing dx, in all 5*M*N*e. At
32768x4096 bf16 that is 537 MB and 1342 MB: about 126 us and 316 us at a 4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

# (M, N, dtype, kept by --quick): a small odd row length, and attention-score-sized rows
SHAPES = [(128, 257, torch.float32, True), (32768, 4096, torch.bfloat16, False)]


def torch_softmax(x):
    return torch.softmax(x, dim=-1)


def _make(m: int, n: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        x = draw.normal((m, n), scale=4.0)
        return BenchInputs(args=(x,), grad_wrt=(0,), upstream=draw.normal((m, n)))

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda m, n, e: {"forward": 2 * m * n * e, "forward+backward": 5 * m * n * e})


def _liger_softmax(function, x):
    # Liger 0.8.5: forward(ctx, input_), softmax over the last dimension
    return function.apply(x)


def implementations() -> dict:
    from kernels.softmax import softmax

    return {
        "triton_softmax (project)": softmax,
        "torch.softmax": torch_softmax,
        "torch.compile(torch.softmax)": compiled(torch_softmax),
        "liger Softmax": liger_column("liger_kernel.ops.softmax", "LigerSoftmaxFunction", _liger_softmax),
    }
