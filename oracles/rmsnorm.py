"""RMSNorm reference, in float64.

    r  = 1 / sqrt(mean(x^2, over the N columns of a row) + eps)
    y  = x * r * gamma

Backward, with u = dy * gamma:

    dx     = r * u - x * r^3 * mean(u * x)      (mean over the N columns of the row)
    dgamma = sum over rows of dy * x * r        (a sum over the M rows, never a mean)
"""

from __future__ import annotations

import torch


def rmsnorm_reference(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck and gradgradcheck)."""
    xf = x.to(torch.float64)
    gf = gamma.to(torch.float64)
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return xf * r * gf


def rmsnorm_backward(
    x: torch.Tensor, gamma: torch.Tensor, dy: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The explicit gradient formula, float64, independent of autograd."""
    xf, gf, dyf = (t.to(torch.float64) for t in (x, gamma, dy))
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    u = dyf * gf
    dx = r * u - xf * r.pow(3) * (u * xf).mean(-1, keepdim=True)
    dgamma = (dyf * xf * r).sum(0)
    return dx, dgamma


def rmsnorm_backward_magnitudes(
    x: torch.Tensor, gamma: torch.Tensor, dy: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Size of the terms each gradient formula cancels or sums: |r*u| + |x*r^3*mean(u*x)| for
    dx, sum over rows of |dy*x*r| for dgamma. Rounding errors of any finite-precision
    evaluation scale with these, not with the (possibly cancelled) result."""
    xf, gf, dyf = (t.to(torch.float64) for t in (x, gamma, dy))
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    u = dyf * gf
    dx_terms = (r * u).abs() + (xf * r.pow(3) * (u * xf).mean(-1, keepdim=True)).abs()
    dgamma_terms = (dyf * xf * r).abs().sum(0)
    return dx_terms, dgamma_terms
