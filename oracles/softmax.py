"""Softmax over the last dimension, reference in float64.

    p_j = exp(x_j - max(x)) / sum_k exp(x_k - max(x))       per row

Backward, with c = sum_k p_k dy_k (derivation: d p_j / d x_i = p_j (delta_ij - p_i)):

    dx_j = p_j * (dy_j - c)
"""

from __future__ import annotations

import torch


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck and gradgradcheck)."""
    return torch.softmax(x.to(torch.float64), dim=-1)


def softmax_backward(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """The explicit gradient formula, float64, independent of autograd."""
    p = softmax_reference(x)
    dyf = dy.to(torch.float64)
    return p * (dyf - (p * dyf).sum(-1, keepdim=True))


def _relative_scale(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, s): s_j bounds, in units of one rounding, the relative error of any finite-precision p_j.

    Every evaluation exponentiates x_j - max; the subtraction is exact up to a rounding of
    |x_j - max|, which exp turns into a relative error of that size in exp(x_j - max). The
    normaliser sums those terms weighted by p, so s_j = 1 + |x_j - max| + sum_k p_k |x_k - max|.
    """
    xf = x.to(torch.float64)
    p = torch.softmax(xf, dim=-1)
    spread = xf.amax(-1, keepdim=True) - xf
    weighted = torch.where(p > 0, p * spread, 0.0)  # an entry of -inf: p = 0, spread = inf
    return p, torch.where(p > 0, 1.0 + spread, 1.0) + weighted.sum(-1, keepdim=True)


def softmax_forward_magnitudes(x: torch.Tensor, tiny: float = 0.0) -> torch.Tensor:
    """p_j s_j (+ tiny where p_j > 0): the size of the error terms of p_j (see _relative_scale). ``tiny``: the
    smallest normal of a dtype a kernel may keep exp(x - max) or p in (``Contract(precision=
    "input")``): rounding there is off by u (|v| + tiny), the spacing of the subnormals."""
    p, s = _relative_scale(x)
    return p * s + torch.where(p > 0, tiny, 0.0)  # an entry of -inf: exactly 0, no allowance


def softmax_backward_magnitudes(x: torch.Tensor, dy: torch.Tensor, tiny: float = 0.0) -> torch.Tensor:
    """Size of the terms dx_j = p_j * (dy_j - c) cancels, with the error of p carried along:
    e_j (|dy_j| + |c|) + p_j * sum_k e_k |dy_k|, e_j = p_j s_j + tiny (p as a kernel may hold it,
    ``tiny`` as in softmax_forward_magnitudes: a backward that starts from y saved in fp16 meets
    p below fp16's smallest normal, 6.1e-5, whenever the logits spread). It bounds |dx_j|."""
    p, s = _relative_scale(x)
    dyf = dy.to(torch.float64)
    c = (p * dyf).sum(-1, keepdim=True)
    e = p * s + torch.where(p > 0, tiny, 0.0)
    return e * (dyf.abs() + c.abs()) + p * (e * dyf.abs()).sum(-1, keepdim=True)
