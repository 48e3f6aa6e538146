"""Rotary position embedding (RoPE), reference in float64.

x[B, S, H, D] is rotated pair by pair: pair i of the token at sequence index s is (x1, x2) =
(x[..., i], x[..., i + D/2]) in the half-split convention (GPT-NeoX, Llama) or
(x[..., 2i], x[..., 2i + 1]) interleaved (GPT-J), and its angle is that of position
p = offset + s, read from the tables cos[P, D/2], sin[P, D/2] (P >= offset + S):

    y1 = x1 * cos[p, i] - x2 * sin[p, i]
    y2 = x2 * cos[p, i] + x1 * sin[p, i]

The map is linear in x and orthogonal when cos^2 + sin^2 = 1; its gradient is the transpose,
the rotation by -theta (cos and sin are not differentiated):

    dx1 =  dy1 * cos + dy2 * sin
    dx2 = -dy1 * sin + dy2 * cos
"""

from __future__ import annotations

import torch


def _halves(t: torch.Tensor, interleaved) -> tuple[torch.Tensor, torch.Tensor]:
    return (t[..., 0::2], t[..., 1::2]) if interleaved else t.chunk(2, dim=-1)


def _join(y1: torch.Tensor, y2: torch.Tensor, interleaved) -> torch.Tensor:
    return torch.stack((y1, y2), dim=-1).flatten(-2) if interleaved else torch.cat((y1, y2), dim=-1)


def _tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int):
    """cos and sin of the positions offset .. offset + S - 1, float64, broadcast over [B, S, H, D/2]."""
    s = x.shape[1]
    c = cos.to(torch.float64)[offset : offset + s]
    sn = sin.to(torch.float64)[offset : offset + s]
    return c[None, :, None, :], sn[None, :, None, :]


def rope_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int, interleaved) -> torch.Tensor:
    """Forward in float64, differentiable in x by autograd."""
    c, sn = _tables(x, cos, sin, offset)
    x1, x2 = _halves(x.to(torch.float64), interleaved)
    return _join(x1 * c - x2 * sn, x2 * c + x1 * sn, interleaved)


def rope_backward(x, cos, sin, offset, interleaved, dy) -> tuple[torch.Tensor]:
    """(dx,): dy rotated by -theta, float64, independent of autograd."""
    c, sn = _tables(x, cos, sin, offset)
    d1, d2 = _halves(dy.to(torch.float64), interleaved)
    return (_join(d1 * c + d2 * sn, d2 * c - d1 * sn, interleaved),)


def rope_magnitudes(x, cos, sin, offset, interleaved, dy) -> tuple[torch.Tensor, torch.Tensor]:
    """Size of the two products each output element adds or cancels, (forward, dx):
    |x1 cos| + |x2 sin| and |x2 cos| + |x1 sin|, likewise with dy for dx."""
    c, sn = _tables(x, cos, sin, offset)
    c, sn = c.abs(), sn.abs()

    def terms(t):
        t1, t2 = _halves(t.to(torch.float64).abs(), interleaved)
        return _join(t1 * c + t2 * sn, t2 * c + t1 * sn, interleaved)

    return terms(x), terms(dy)
