"""Matrix product with a bias and an activation epilogue, reference in float64.

    z = a @ b + bias              a [M, K], b [K, N], bias [N] broadcast over rows
    y = act(z)                    act: none (identity), relu, gelu_tanh

    gelu_tanh(z) = 0.5 z (1 + tanh(u)),  u = sqrt(2 / pi) (z + 0.044715 z^3)

Backward, with dz = dy * act'(z) (relu'(z) = 0 for z <= 0, else 1, NaN included: torch's convention):

    da    = dz @ b^T
    db    = a^T @ dz
    dbias = sum over rows of dz
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ACTIVATIONS = ("none", "relu", "gelu_tanh")
# the largest slope of each activation: an error of the pre-activation z moves y by at most this much
LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu_tanh": 1.13}
CURVATURE = 0.8  # the largest |gelu_tanh''|, at z = 0


def _act(z: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "none":
        return z
    if activation == "relu":
        return torch.relu(z)
    if activation == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")


def matmul_reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str) -> torch.Tensor:
    """Forward in float64, differentiable in a, b and bias by autograd."""
    z = a.to(torch.float64) @ b.to(torch.float64) + bias.to(torch.float64)
    return _act(z, activation)


def _slope(z: torch.Tensor, activation: str) -> torch.Tensor:
    """act'(z), float64."""
    if activation == "none":
        return torch.ones_like(z)
    if activation == "relu":  # torch's threshold_backward: 0 where z <= 0, so a NaN z passes dy on
        return torch.where(z <= 0, 0.0, 1.0).to(z.dtype)
    k = math.sqrt(2.0 / math.pi)
    t = torch.tanh(k * (z + 0.044715 * z**3))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * z * z)


def matmul_backward(a, b, bias, activation, dy) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(da, db, dbias), float64, from the formulas above (independent of autograd)."""
    af, bf = a.to(torch.float64), b.to(torch.float64)
    dz = dy.to(torch.float64) * _slope(af @ bf + bias.to(torch.float64), activation)
    return dz @ bf.T, af.T @ dz, dz.sum(0)


def matmul_magnitudes(a, b, bias, activation, dy) -> tuple[torch.Tensor, ...]:
    """Size of the terms each check sums, (forward, da, db, dbias): |a| @ |b| + |bias| scaled by
    the activation's largest slope, plus |y| for the epilogue's own rounding; |dz| @ |b|^T,
    |a|^T @ |dz| and sum |dz| for the gradients, with |dz| + 0.8 |dy| (|a| @ |b| + |bias|) for
    gelu_tanh, whose slope moves with z's own error, and |dz| + |dy| (|a| @ |b| + |bias|) / |z|
    for relu, whose branch flips where z is within its error of 0."""
    af, bf, biasf = a.to(torch.float64), b.to(torch.float64), bias.to(torch.float64)
    z = af @ bf + biasf
    pre = af.abs() @ bf.abs() + biasf.abs()
    slope = _slope(z, activation)
    dz = (dy.to(torch.float64) * slope).abs()
    plain = torch.where(torch.isfinite(dz), dz, torch.zeros_like(dz))
    if activation == "gelu_tanh":  # dz = dy * act'(z) inherits z's error, scaled by act'' (|gelu''| <= 0.8)
        dz = dz + CURVATURE * dy.to(torch.float64).abs() * pre
    elif activation == "relu":
        # relu' jumps at 0: a z computed with an error of e * pre takes the other branch only where
        # |z| < e * pre, and then dz is off by |dy| < e * |dy| * pre / |z|: a term of |dy| pre / |z|
        # bounds it for any e (|z| floored at 2^-24 pre, where the term is already |dy| 2^24)
        near = torch.where(pre > 0, pre / torch.maximum(z.abs(), pre * 2.0**-24), torch.zeros_like(pre))
        dz = dz + dy.to(torch.float64).abs() * near
    # where z is infinite (an inf in a or b) the slope is certain and |dz| is all there is: an
    # infinite term there would take the allowance of every gradient summing that dz away
    dz = torch.where(torch.isfinite(dz), dz, plain)
    return LIPSCHITZ[activation] * pre + _act(z, activation).abs(), dz @ bf.abs().T, af.abs().T @ dz, dz.sum(0)
