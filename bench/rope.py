"""RoPE benchmark: the project's kernel against torch and torch.compile.

Signature of every implementation: ``f(x[B, S, H, D], cos[P, D/2], sin[P, D/2], offset, interleaved)
-> y``. Minimal bytes moved (e = element size, tables read once): forward reads x and the S rows
of cos and sin it uses and writes y, (2 B S H D + S D) e; forward+backward adds reading dy and
the tables again and writing dx, in all (4 B S H D + 2 S D) e. At B=8, S=4096, H=32, D=128 bf16
(a Llama-7B query slice) that is 537 MB and 1075 MB: about 126 us and 253 us at a 4.25 TB/s copy
ceiling.
"""

from __future__ import annotations

import torch

from bench._common import DTYPE_NAMES, Draws, compiled, element_size
from harness.workflows.benchmark import BenchInputs, Workload

# (B, S, H, D, dtype, kept by --quick)
SHAPES = [(2, 37, 5, 130, torch.float32, True), (8, 4096, 32, 128, torch.bfloat16, False)]


def torch_rope(x, cos, sin, offset=0, interleaved=0):
    s = x.shape[1]
    c = cos[offset : offset + s][None, :, None, :].to(x.dtype)
    sn = sin[offset : offset + s][None, :, None, :].to(x.dtype)
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else x.chunk(2, dim=-1)
    y1, y2 = x1 * c - x2 * sn, x2 * c + x1 * sn
    return torch.stack((y1, y2), dim=-1).flatten(-2) if interleaved else torch.cat((y1, y2), dim=-1)


def _make(b: int, s: int, h: int, d: int, dtype: torch.dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        x, dy = draw.normal((b, s, h, d)), draw.normal((b, s, h, d))
        theta = torch.arange(s, device=device, dtype=torch.float32)[:, None] * (
            10000.0 ** (-torch.arange(d // 2, device=device, dtype=torch.float32) / (d // 2)))
        return BenchInputs(args=(x, theta.cos().to(dtype), theta.sin().to(dtype), 0, 0), grad_wrt=(0,), upstream=dy)

    return make


def workloads() -> list[Workload]:
    out = []
    for b, s, h, d, dtype, quick in SHAPES:
        e = element_size(dtype)
        out.append(Workload(name=f"{b}x{s}x{h}x{d} {DTYPE_NAMES[dtype]}", make=_make(b, s, h, d, dtype),
                            bytes={"forward": (2 * b * s * h * d + s * d) * e,
                                   "forward+backward": (4 * b * s * h * d + 2 * s * d) * e},
                            quick=quick))
    return out


def implementations() -> dict:
    from kernels.rope import rope

    return {
        "triton_rope (project)": rope,
        "torch rotate-half": torch_rope,
        "torch.compile(rotate-half)": compiled(torch_rope),
    }
