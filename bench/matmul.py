"""Matmul with bias and activation benchmark: the project's kernel against torch and torch.compile.

Signature of every implementation: ``f(a[M, K], b[K, N], bias[N], activation) -> y[M, N]``.
Bytes are not the limit here but FLOPs: 2 M N K for the forward, three products (6 M N K) for
forward+backward; the bytes column counts the operands and results once (e = element size):
forward (M K + K N + N + M N) e, forward+backward twice that plus dy. At M=8192, K=N=4096 bf16
(an MLP projection of 8192 tokens) the forward is 275 GFLOP: about 348 us at 790 TFLOP/s.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench._common import DTYPE_NAMES, Draws, compiled, element_size
from harness.workflows.benchmark import BenchInputs, Workload

# (M, K, N, activation, dtype, kept by --quick)
SHAPES = [(65, 257, 33, "gelu_tanh", torch.float32, True), (8192, 4096, 4096, "gelu_tanh", torch.bfloat16, False)]


def torch_matmul(a, b, bias, activation="none"):
    z = torch.addmm(bias, a, b)
    if activation == "relu":
        return torch.relu(z)
    if activation == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    return z


def _make(m: int, k: int, n: int, activation: str, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        a, b, bias = draw.normal((m, k)), draw.normal((k, n), scale=k**-0.5), draw.normal((n,))
        return BenchInputs(args=(a, b, bias, activation), grad_wrt=(0, 1, 2), upstream=draw.normal((m, n)))

    return make


def workloads() -> list[Workload]:
    out = []
    for m, k, n, act, dtype, quick in SHAPES:
        e = element_size(dtype)
        once = (m * k + k * n + n + m * n) * e
        out.append(Workload(name=f"{m}x{k}x{n} {act} {DTYPE_NAMES[dtype]}", make=_make(m, k, n, act, dtype),
                            bytes={"forward": once, "forward+backward": 2 * once + m * n * e},
                            flops={"forward": 2.0 * m * n * k, "forward+backward": 6.0 * m * n * k}, quick=quick))
    return out


def implementations() -> dict:
    from kernels.matmul import matmul

    return {
        "triton_matmul (project)": matmul,
        "torch addmm + activation": torch_matmul,
        "torch.compile(addmm + activation)": compiled(torch_matmul),
    }
