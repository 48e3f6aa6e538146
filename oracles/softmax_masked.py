"""Softmax of scaled, additively masked scores over the last dimension, reference in float64.

    z_j = scale * x_j + mask_j,     p_j = exp(z_j - max(z)) / sum_k exp(z_k - max(z))   per row

mask_j is 0 (kept) or -inf / a most negative value (masked); every row keeps an entry.
Backward (the mask gets no gradient), with c = sum_k p_k dy_k:

    dx_j = scale * p_j * (dy_j - c)
"""

from __future__ import annotations

import torch


def softmax_masked_reference(x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.softmax(x.to(torch.float64) * scale + mask.to(torch.float64), dim=-1)


def _relative_scale(x, mask, scale):
    """(p, s): s_j bounds, in roundings, the relative error of any fp32 evaluation of p_j. The
    exponent z_j - max carries a rounding of |scale x_j| (the product), of |z_j| where the mask
    is not 0 (the sum scale x_j + mask_j: exact where mask_j is 0, a rounding of |z_j| where it
    is a most negative value such as -65504), the same two for the row's max, and a rounding of
    |z_j - max| (the subtraction); the normaliser sums those with p."""
    xs = x.to(torch.float64) * scale
    m = mask.to(torch.float64)
    z = xs + m
    p = torch.softmax(z, dim=-1)
    top = z.argmax(-1, keepdim=True)
    added = torch.where(m != 0, z.abs(), 0.0)  # the sum's own rounding; -inf entries have p = 0 (below)
    own = (z.amax(-1, keepdim=True) - z) + xs.abs() + added + xs.gather(-1, top).abs() + added.gather(-1, top)
    weighted = torch.where(p > 0, p * own, 0.0)  # a masked entry: p = 0, own = inf
    return p, torch.where(p > 0, 1.0 + own, 1.0) + weighted.sum(-1, keepdim=True)


def softmax_masked_magnitudes(x, mask, scale, dy, tiny: float = 0.0):
    """(forward, dx) term sizes: e_j = p_j s_j + tiny, and |scale| (e_j (|dy_j| + |c|) + p_j sum_k e_k |dy_k|).
    ``tiny``: the smallest normal of a dtype a kernel may keep p in (oracles.softmax); a masked
    entry (p = 0 exactly) gets none."""
    p, s = _relative_scale(x, mask, scale)
    dyf = dy.to(torch.float64)
    c = (p * dyf).sum(-1, keepdim=True)
    e = p * s + torch.where(p > 0, tiny, 0.0)
    dx = abs(scale) * (e * (dyf.abs() + c.abs()) + p * (e * dyf.abs()).sum(-1, keepdim=True))
    return e, dx
