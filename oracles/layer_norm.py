"""LayerNorm reference, in float64.

    mu   = mean(x)                          over the N columns of a row
    var  = mean((x - mu)^2)                 the population variance (1/N, never 1/(N-1))
    r    = 1 / sqrt(var + eps)
    xhat = (x - mu) * r
    y    = xhat * weight + bias

Backward, with g = dy * weight (derivation: d xhat_j / d x_i = r * (delta_ij - 1/N - xhat_i xhat_j / N)):

    dx      = r * (g - mean(g) - xhat * mean(g * xhat))   means over the N columns of the row
    dweight = sum over rows of dy * xhat                   sums over the M rows, never means
    dbias   = sum over rows of dy
"""

from __future__ import annotations

import torch


def _f64(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(torch.float64) for t in tensors)


def _stats(xf: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    mu = xf.mean(-1, keepdim=True)
    var = (xf - mu).square().mean(-1, keepdim=True)
    return mu, torch.rsqrt(var + eps)


def layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck and gradgradcheck)."""
    xf, wf, bf = _f64(x, weight, bias)
    mu, r = _stats(xf, eps)
    return (xf - mu) * r * wf + bf


def layer_norm_backward(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The explicit gradient formulas, float64, independent of autograd: (dx, dweight, dbias)."""
    xf, wf, dyf = _f64(x, weight, dy)
    mu, r = _stats(xf, eps)
    xhat = (xf - mu) * r
    g = dyf * wf
    dx = r * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx, (dyf * xhat).flatten(0, -2).sum(0), dyf.flatten(0, -2).sum(0)


def _centering_terms(xf: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, r): h = (|x| + mean|x|) * r is the size, in units of the normalised row, of the terms
    x - mu cancels. The mean of a row is a sum whose rounding scales with the row's |x|, not with
    |mu|: a row with a large common offset against a small spread (1e4 + N(0, 1)) has h around
    2e4 while xhat is around 1, and an fp32 mean is off by ulps of the offset; a row of zero mean
    (1e-4 N(0, 1)) still has an fp32 mean off by a fraction of an ulp of its typical |x|, which
    every element's xhat inherits, the ones near the mean included (measured: torch's CUDA
    layer_norm at M=4093, N=509, run 43, 1.03 x an allowance built on |mu|)."""
    mu, r = _stats(xf, eps)
    return (xf.abs() + xf.abs().mean(-1, keepdim=True)) * r, r


def layer_norm_forward_magnitudes(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    """Size of the terms y sums or cancels: |weight| * h + |bias| (h from the centering)."""
    xf, wf, bf = _f64(x, weight, bias)
    h, _ = _centering_terms(xf, eps)
    return wf.abs() * h + bf.abs()


def layer_norm_backward_magnitudes(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Size of the terms each gradient formula cancels or sums, (dx, dweight, dbias):
      dx:      r * (|g| + mean|g| + h * mean(|g| * h))     with g = dy * weight
      dweight: sum over rows of |dy| * h
      dbias:   sum over rows of |dy|
    Each bounds its result; rounding errors of an fp32 evaluation scale with them."""
    xf, wf, dyf = _f64(x, weight, dy)
    h, r = _centering_terms(xf, eps)
    g = (dyf * wf).abs()
    dx_terms = r * (g + g.mean(-1, keepdim=True) + h * (g * h).mean(-1, keepdim=True))
    return dx_terms, (dyf.abs() * h).flatten(0, -2).sum(0), dyf.abs().flatten(0, -2).sum(0)
