"""SwiGLU gate, reference in float64.

    y = silu(a) * b = a * sigmoid(a) * b            elementwise

Backward, with s = sigmoid(a) (derivation: d silu(a) / d a = s + a * s * (1 - s)):

    da = dy * b * s * (1 + a * (1 - s))
    db = dy * a * s
"""

from __future__ import annotations

import torch


def swiglu_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck and gradgradcheck)."""
    af, bf = a.to(torch.float64), b.to(torch.float64)
    return af * torch.sigmoid(af) * bf


def swiglu_backward(a: torch.Tensor, b: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The explicit gradient formulas, float64, independent of autograd: (da, db)."""
    af, bf, dyf = (t.to(torch.float64) for t in (a, b, dy))
    s = torch.sigmoid(af)
    return dyf * bf * s * (1.0 + af * (1.0 - s)), dyf * af * s


def swiglu_backward_magnitudes(
    a: torch.Tensor, b: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Size of the terms each gradient sums or cancels, (da, db).

    da adds s and a*s*(1-s), which cancel near a = -1.28 (where silu has its minimum):
    |dy * b| * (s + |a| * s * (1 - s)). db is a plain product: |db| itself. The forward is a
    plain product too (no cancellation), so it needs no magnitude beyond its own value."""
    af, bf, dyf = (t.to(torch.float64) for t in (a, b, dy))
    s = torch.sigmoid(af)
    return (dyf * bf).abs() * (s + af.abs() * s * (1.0 - s)), (dyf * af * s).abs()
