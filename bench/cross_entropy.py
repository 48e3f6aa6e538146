"""Cross-entropy benchmark (mean over non-ignored rows): the project's kernel against torch,
torch.compile and Liger, at an LLM's vocabulary size.

Signature of every implementation: ``f(logits[N, V], target[N], ignore_index) -> loss``.
Minimal bytes moved (e = element size, targets int64): forward reads the logits and targets,
N*V*e + 8*N; forward+backward adds reading them again and writing dlogits, in all
3*N*V*e + 16*N. At N=16384, V=128256 bf16 that is 4.2 GB and 12.6 GB: about 1.0 ms and 3.0 ms
at a 4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

IGNORE_INDEX = -100
# (N, V, dtype, kept by --quick): a small vocabulary, and Llama 3's 128256 at 16384 tokens
SHAPES = [(512, 32000, torch.float32, True), (16384, 128256, torch.bfloat16, False)]


def torch_cross_entropy(logits, target, ignore_index=IGNORE_INDEX):
    return F.cross_entropy(logits, target, ignore_index=ignore_index)


def _make(n: int, v: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        logits = draw.normal((n, v), scale=2.0)
        target = draw.targets(n, v, IGNORE_INDEX)
        return BenchInputs(args=(logits, target, IGNORE_INDEX), grad_wrt=(0,), upstream=None)

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda n, v, e: {"forward": n * v * e + 8 * n,
                                                        "forward+backward": 3 * n * v * e + 16 * n},
                        name="N={0} V={1} {dtype}")


def _liger_cross_entropy(function, logits, target, ignore_index=IGNORE_INDEX):
    # Liger 0.8.5: forward(ctx, _input, target, weight, ignore_index, ...) returns a tuple whose
    # first item is the loss; its forward writes the gradient into the logits' storage
    out = function.apply(logits, target, None, ignore_index)
    return out[0] if isinstance(out, tuple) else out


def implementations() -> dict:
    from kernels.cross_entropy import cross_entropy

    return {
        "triton_cross_entropy (project)": cross_entropy,
        "torch F.cross_entropy": torch_cross_entropy,
        "torch.compile(F.cross_entropy)": compiled(torch_cross_entropy),
        "liger CrossEntropy": liger_column("liger_kernel.ops.cross_entropy", "LigerCrossEntropyFunction",
                                           _liger_cross_entropy),
    }
