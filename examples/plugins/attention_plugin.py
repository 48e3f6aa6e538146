"""A plugin that registers a user's own attention kernel for the built-in ``attention`` op.

    python -m harness verify --plugin examples/plugins/attention_plugin.py --op attention \
        --select my_attention --backend interpreter

The op (properties/ops/attention.py) fixes the signature: ``f(q[B, Hq, S, D], k[B, Hkv, T, D],
v[B, Hkv, T, D], causal: bool, scale: float) -> o[B, Hq, S, D]`` in q's dtype, Hq a multiple of
Hkv (query head h reads key/value head h // (Hq / Hkv)), causal aligned to the bottom right
(query i sees keys j <= i + T - S), a query that sees no key giving 0. Gradients come from the
kernel's autograd: the harness checks dq, dk and dv against float64.

The kernel below is plain torch in fp32, chunked over the keys with an online softmax as a
FlashAttention kernel would be, so it runs anywhere; a Triton kernel registers the same way.
Its Contract says what it promises: fp32, fp16 and bf16 inputs, and (a rule) head dims up to
256, which every case of the op meets.
"""

import torch

from harness import Contract, register_kernel

CHUNK = 16  # keys per step of the online softmax


def _head_dim_rule(q, k, v, causal, scale):
    return f"head dim {q.shape[-1]} > 256" if q.shape[-1] > 256 else None


@register_kernel(
    "attention",
    name="my_attention",
    contract=Contract(dtypes=(torch.float32, torch.float16, torch.bfloat16), rule=_head_dim_rule),
    description="an example user kernel: chunked online-softmax attention in torch fp32",
)
def my_attention(q, k, v, causal, scale):
    g = q.shape[1] // k.shape[1]
    qf = q.float()
    kf, vf = k.float().repeat_interleave(g, dim=1), v.float().repeat_interleave(g, dim=1)
    s, t = q.shape[2], k.shape[2]
    rows = torch.arange(s, device=q.device).unsqueeze(1)
    m = torch.full((*q.shape[:3], 1), float("-inf"), device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros_like(qf)
    for start in range(0, t, CHUNK):
        cols = torch.arange(start, min(start + CHUNK, t), device=q.device).unsqueeze(0)
        scores = (qf @ kf[:, :, start:start + CHUNK].transpose(-1, -2)) * scale
        if causal:
            scores = scores.masked_fill(cols > rows + (t - s), float("-inf"))
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # rows that saw no key yet
        p = torch.exp(scores - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vf[:, :, start:start + CHUNK]
        m = m_new
    return (acc / torch.where(l > 0, l, torch.ones_like(l))).to(q.dtype)
