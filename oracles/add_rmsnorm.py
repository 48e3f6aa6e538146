"""Fused residual add + RMSNorm reference, in float64.

    h  = x + residual                          (the new residual stream, returned)
    r  = 1 / sqrt(mean(h^2, over the N columns of a row) + eps)
    y  = h * r * gamma

Backward, with upstream gradients dy (of y) and dh (of h), u = dy * gamma:

    dx = dresidual = dh + r * u - h * r^3 * mean(u * h)
    dgamma         = sum over rows of dy * h * r
"""

from __future__ import annotations

import torch

from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference


def add_rmsnorm_reference(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, h) in float64, differentiable by autograd."""
    h = x.to(torch.float64) + residual.to(torch.float64)
    return rmsnorm_reference(h, gamma, eps), h


def add_rmsnorm_backward(x, residual, gamma, eps, dy, dh) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dresidual, dgamma), the explicit formula, float64, independent of autograd."""
    h = x.to(torch.float64) + residual.to(torch.float64)
    dnorm, dgamma = rmsnorm_backward(h, gamma, dy, eps)
    dx = dh.to(torch.float64) + dnorm
    return dx, dx.clone(), dgamma


def add_rmsnorm_magnitudes(x, residual, gamma, eps, dy, dh) -> tuple[torch.Tensor | None, ...]:
    """Per check (y, h, dx, dresidual, dgamma), the size of the terms its formula sums or cancels:
    |y| (None) for y; |x| + |residual| for h, the one sum it is; dx and dresidual add dh to the
    RMSNorm terms of h; dgamma sums |dy * h * r| over rows."""
    xf, rf = x.to(torch.float64), residual.to(torch.float64)
    dnorm_terms, dgamma_terms = rmsnorm_backward_magnitudes(xf + rf, gamma, dy, eps)
    dx_terms = dh.to(torch.float64).abs() + dnorm_terms
    return None, xf.abs() + rf.abs(), dx_terms, dx_terms, dgamma_terms


def add_rmsnorm_rounded_h(x, residual, gamma, eps, dy, dh) -> tuple[torch.Tensor | None, ...]:
    """Per check (y, h, dx, dresidual, dgamma), the first-order worst-case change of the result
    computed at a moved h, when each element of h moves by at most |h_k| (a rounding of h, to be
    scaled by the unit roundoff): sum over k of |d result / d h_k| |h_k|, the roundings of
    different elements free to align. The derivative with respect to an element is taken whole
    (all of its paths, through r and the row's mean, with their signs: a kernel computes at one
    h); the other elements of the row are bounded term by term. With S = sum_k h_k^2 and
    A = sum_k |u_k h_k| over the row, r = 1 / sqrt(S / N + eps), m = mean(u h), u = dy * gamma:

    - y_i = h_i r g_i:  |r g_i h_i (1 - r^2 h_i^2 / N)| + |y_i| r^2 (S - h_i^2) / N;
    - h: none (h is the stored value; its own rounding is its output's);
    - dnorm_i = r u_i - h_i r^3 m:  |h_i| |-r^3 m + r^3 (3 r^2 m h_i^2 - 2 u_i h_i) / N|
      + r^3 (|u_i| (S - h_i^2) + 3 r^2 |m h_i| (S - h_i^2) + |h_i| (A - |u_i h_i|)) / N;
      dx and dresidual add dh, which does not depend on h;
    - dgamma_j = sum_i dy_ij h_ij r_i: sum over rows of
      |dy_ij r_i h_ij (1 - r_i^2 h_ij^2 / N)| + |dy_ij h_ij| r_i^3 (S_i - h_ij^2) / N.

    A backward that takes r of one h and the h beside it of another (the forward's fp32 h and the
    stored one) moves the two terms of dnorm apart, which no single h does: at N = 1,
    dnorm = r u eps / (h^2 + eps) and this bound is 3 |dnorm| h^2 / (h^2 + eps), far below |r u|.
    """
    h = x.to(torch.float64) + residual.to(torch.float64)
    g, dyf = gamma.to(torch.float64), dy.to(torch.float64)
    n = h.shape[-1]
    s2 = h.square().sum(-1, keepdim=True)
    rest = (s2 - h.square()).clamp(min=0)  # the row's other elements
    r = torch.rsqrt(s2 / n + eps)
    y = h * r * g
    by_y = (y * (1 - r.square() * h.square() / n)).abs() + y.abs() * r.square() * rest / n
    u = dyf * g
    m = (u * h).mean(-1, keepdim=True)
    a = (u * h).abs().sum(-1, keepdim=True)
    own = (h * (-r.pow(3) * m + r.pow(3) * (3 * r.square() * m * h.square() - 2 * u * h) / n)).abs()
    others = r.pow(3) * (u.abs() * rest + 3 * r.square() * (m * h).abs() * rest + h.abs() * (a - (u * h).abs())) / n
    by_dnorm = own + others
    contrib = dyf * h * r
    per_row = (contrib * (1 - r.square() * h.square() / n)).abs() + contrib.abs() * r.square() * rest / n
    # a row with an infinite element has r = 0: it adds exactly 0 to dgamma wherever its own element
    # is finite, and no rounding moves that (0 * inf above is not a term of it)
    by_dgamma = torch.where(torch.isfinite(per_row), per_row, 0.0).sum(0)
    return by_y, None, by_dnorm, by_dnorm, by_dgamma
