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
    """Per check (y, h, dx, dresidual, dgamma), the first-order worst-case change when every
    element of h moves by a relative 1 (|dh_k| <= |h_k|: a rounding of h, to be scaled by the
    unit roundoff), each effect taken with its absolute value (rounding errors may align):

    - y_i = h_i r g_i: directly |y_i|; through r (|dr / r| <= r^2 mean(h^2) <= 1) |y_i| again;
    - h: none (h is the stored value; its own rounding is its output's);
    - dnorm_i = r u_i - h_i r^3 m, m = mean(u h): |r u_i| and 3 |h_i r^3 m| through r,
      |h_i r^3 m| through h_i, |h_i| r^3 mean(|u h|) through m; dx and dresidual add dh, exact;
    - dgamma_j = sum_i dy_ij h_ij r_i: sum_i |dy h r| directly and again through r_i.
    """
    h = x.to(torch.float64) + residual.to(torch.float64)
    g, dyf = gamma.to(torch.float64), dy.to(torch.float64)
    r = torch.rsqrt(h.square().mean(-1, keepdim=True) + eps)
    y = (h * r * g).abs()
    u = dyf * g
    m = (u * h).mean(-1, keepdim=True)
    dnorm = (r * u).abs() + 4 * (h * r.pow(3) * m).abs() + h.abs() * r.pow(3) * (u * h).abs().mean(-1, keepdim=True)
    dgamma = 2 * (dyf * h * r).abs().sum(0)
    return 2 * y, None, dnorm, dnorm, dgamma
