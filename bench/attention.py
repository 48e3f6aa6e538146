"""Attention benchmark: the project's kernel against torch's scaled_dot_product_attention.

Signature of every implementation: ``f(q[B, Hq, S, D], k[B, Hkv, T, D], v[B, Hkv, T, D],
causal, scale) -> o[B, Hq, S, D]``. The workloads: a causal prefill with grouped heads
(B=4, Hq=32, Hkv=8, S=T=2048, D=128, bf16) and a decode step over a long cache (S=1,
T=8192); --quick keeps a small fp32 case. FLOP: 4 * B * Hq * S * T * D for the forward (two
matmuls), halved under causal with S = T; the backward adds 2.5x that (five matmuls, one of
them the recomputed scores). Minimal bytes: the forward reads q, k, v and writes o; the
backward also reads o and do and writes dq, dk, dv.

The project's kernel computes every tl.dot in IEEE fp32 (no TF32, no bf16 tensor-core
inputs), so on a GPU it trades speed for the fp32-intermediate error model; SDPA's flash
path multiplies bf16 on tensor cores.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench._common import DTYPE_NAMES, Draws, element_size
from harness.workflows.benchmark import BenchInputs, Workload

# (B, Hq, Hkv, S, T, D, causal, dtype, kept by --quick)
SHAPES = [
    (1, 4, 2, 129, 257, 64, True, torch.float32, True),
    (4, 32, 8, 2048, 2048, 128, True, torch.bfloat16, False),
    (8, 32, 8, 1, 8192, 128, False, torch.bfloat16, False),
]


def _bottom_right(s: int, t: int, device) -> torch.Tensor:
    return torch.ones((s, t), dtype=torch.bool, device=device).tril(diagonal=t - s)


def torch_sdpa(q, k, v, causal, scale):
    """SDPA with the op's causal convention: is_causal when S == T (aligned either way), else
    the bottom-right mask as a bool mask; enable_gqa for grouped heads."""
    s, t = q.shape[2], k.shape[2]
    if causal and s != t:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_bottom_right(s, t, q.device), scale=scale,
                                              enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)


def _make(b, hq, hkv, s, t, d, causal, dtype):
    def make(device: str) -> BenchInputs:
        draw = Draws(device, dtype)
        q, k, v = draw.normal((b, hq, s, d)), draw.normal((b, hkv, t, d)), draw.normal((b, hkv, t, d))
        return BenchInputs(args=(q, k, v, causal, d ** -0.5), grad_wrt=(0, 1, 2), upstream=draw.normal((b, hq, s, d)))

    return make


def workloads() -> list[Workload]:
    out = []
    for b, hq, hkv, s, t, d, causal, dtype, quick in SHAPES:
        e = element_size(dtype)
        qo, kv = b * hq * s * d * e, b * hkv * t * d * e
        forward = 4.0 * b * hq * s * t * d * (0.5 if causal and s == t else 1.0)
        out.append(Workload(
            name=f"B={b} Hq={hq} Hkv={hkv} S={s} T={t} D={d}{' causal' if causal else ''} {DTYPE_NAMES[dtype]}",
            make=_make(b, hq, hkv, s, t, d, causal, dtype),
            bytes={"forward": 2 * qo + 2 * kv, "forward+backward": 2 * qo + 2 * kv + 3 * qo + 4 * kv},
            flops={"forward": forward, "forward+backward": 3.5 * forward},
            quick=quick,
        ))
    return out


def implementations() -> dict:
    from kernels.attention import attention

    return {
        "triton_attention (project)": attention,
        "torch scaled_dot_product_attention": torch_sdpa,
    }
