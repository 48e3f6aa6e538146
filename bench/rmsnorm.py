"""RMSNorm benchmark: the project's kernel against torch and Liger, at the tutorial's shape and an LLM shape.

Signature of every implementation: ``f(x[M, N], gamma[N], eps) -> y[M, N]``.
Minimal bytes moved (e = element size; the fp32 per-row 1/rms an implementation may save is
ignored): forward reads x and gamma and writes y, (2*M*N + N)*e; forward+backward adds
reading x, dy, gamma and writing dx, dgamma, in all (5*M*N + 3*N)*e. At 32768x4096 bf16 that
is 537 MB and 1342 MB: about 126 us and 316 us at a 4.25 TB/s copy ceiling.
"""

from __future__ import annotations

import torch

from bench._common import Draws, compiled, liger_column, workloads_of
from harness.workflows.benchmark import BenchInputs, Workload

EPS = 1e-6
# (M, N, dtype, kept by --quick): the tutorial's benchmark shape, and one LLM layer's activations
SHAPES = [(128, 257, torch.float32, True), (32768, 4096, torch.bfloat16, False)]
# the project's goals for triton_rmsnorm, median us per mode (H200)
TARGETS_US = {(128, 257): {"forward": 24.0, "forward+backward": 180.0},
              (32768, 4096): {"forward": 135.0, "forward+backward": 380.0}}
# what limits triton_rmsnorm where a goal is missed (measured: docs/perf-notes.md, attempts 2-5, 14, 17-20, 23)
_AUTOGRAD = ("the host path: forward+backward through autograd took 213 us of host time per call on the H200's "
             "host against 98 us for torch's F.rms_norm (run 46): the forward's checks, two allocations and "
             "a launch (about 29 us), and autograd's Python backward on its device thread with three "
             "allocations and two launches")
LIMITS = {(128, 257): {"forward": ("host time: the cached launch took 16.8 us (Triton's binder 4.0 + the "
                                   "compiled kernel's launcher 7.2 + Python around them), check_contract 3.8, "
                                   "one allocation 4.4, against 18 us for torch's whole F.rms_norm (run 46); "
                                   "the GPU work is about 2 us"),
                       "forward+backward": _AUTOGRAD},
          (32768, 4096): {"forward+backward": (
              "bytes and latency: the forward runs at 94.6% of the copy ceiling, the backward (x, dy read, dx "
              "written, the next row loaded during this row's reduction) at about 3.7 TB/s, 218 us (run 51)")}}


def torch_reference(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """The tutorial's plain-torch reference: computed in float32 (float64 for float64), cast back."""
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(work)
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return (xf * r * gamma.to(work)).to(x.dtype)


def torch_rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), gamma, eps)


def _make(m: int, n: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        x = draw.normal((m, n))
        gamma = draw.normal(n, scale=0.5, shift=1.0)
        return BenchInputs(args=(x, gamma, EPS), grad_wrt=(0, 1), upstream=draw.normal((m, n)))

    return make


def workloads() -> list[Workload]:
    return workloads_of(SHAPES, _make, lambda m, n, e: {"forward": (2 * m * n + n) * e,
                                                        "forward+backward": (5 * m * n + 3 * n) * e},
                        targets_us=TARGETS_US, limits=LIMITS)


def _liger_rms_norm(function, x, gamma, eps):
    # Liger 0.8.5: forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None);
    # its defaults are what models use (in_place=True writes dx into dy: inputs are fresh per run)
    return function.apply(x, gamma, eps)


def implementations() -> dict:
    from kernels.rmsnorm import rmsnorm

    return {
        "triton_rmsnorm (project)": rmsnorm,
        "torch reference (eager)": torch_reference,
        "torch F.rms_norm": torch_rms_norm,
        "torch.compile(reference)": compiled(torch_reference),
        "liger RMSNorm": liger_column("liger_kernel.ops.rms_norm", "LigerRMSNormFunction", _liger_rms_norm),
    }
