"""Fused linear + cross-entropy reference, in float64.

    z[i, j] = x[i] . w[j]                       logits, x [N, D], w [V, D]
    loss_i  = logsumexp_j z[i, j] - z[i, t_i]   for rows with t_i != ignore_index
    loss    = sum of loss_i over valid rows / n_valid   (torch: NaN when n_valid == 0)

Backward, with upstream gradient u of the scalar loss, p = softmax(z) per row and
s = u / n_valid on valid rows, 0 on ignored rows:

    G      = s * (p - onehot(t))      [N, V]
    dx     = G @ w                    [N, D]
    dw     = G^T @ x                  [V, D]   (a sum over rows, never a mean)

With n_valid == 0 every row is ignored and both gradients are zero, as in torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _f64(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(torch.float64) for t in tensors)


def fused_linear_ce_reference(
    x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck)."""
    xf, wf = _f64(x, weight)
    return F.cross_entropy(xf @ wf.T, target, ignore_index=ignore_index)


def _softmax_and_scale(xf, wf, target, upstream, ignore_index):
    logits = xf @ wf.T
    valid = target != ignore_index
    n_valid = int(valid.sum())
    u = upstream.to(torch.float64) if isinstance(upstream, torch.Tensor) else torch.tensor(float(upstream), dtype=torch.float64, device=xf.device)
    scale = torch.where(valid, u.to(xf.device) / max(n_valid, 1), torch.zeros((), dtype=torch.float64, device=xf.device))
    onehot = torch.zeros_like(logits)
    rows = valid.nonzero().squeeze(1)
    onehot[rows, target[rows]] = 1.0
    return logits, torch.softmax(logits, dim=1), onehot, scale.unsqueeze(1), valid


def fused_linear_ce_backward(
    x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, upstream, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """The explicit gradient formula (softmax - one-hot), float64, independent of autograd."""
    xf, wf = _f64(x, weight)
    _, p, onehot, scale, _ = _softmax_and_scale(xf, wf, target, upstream, ignore_index)
    g = scale * (p - onehot)
    return g @ wf, g.T @ xf


def fused_linear_ce_magnitudes(
    x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, upstream, ignore_index: int = -100, tiny: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Size of what each formula sums or cancels, for the cancellation-aware tolerance.

    A finite-precision logit z[i, j] is off by a few ulps of m[i, j] = |x[i]| . |w[j]| (the
    terms of its dot product), so lse is off by ulps of sum_j p m and p[i, j] by ulps of
    p (m + that). Hence, over valid rows:
      loss:  mean of (sum_j p m) + m[i, t_i]            (lse - z_t can cancel to ~0)
      dx:    |s| * ((p * (1 + m + sum_j p m)) @ |w| + |w[t_i]|)
      dw:    (|s| * (p * (1 + m + sum_j p m) + onehot))^T @ |x|
    ``tiny``: the smallest normal of a dtype the gradient's G = p - onehot may be kept in (a kernel
    declaring it): each G element adds ``tiny``, since rounding it there is off by u (|G| + tiny).
    """
    xf, wf = _f64(x, weight)
    ax, aw = xf.abs(), wf.abs()
    _, p, onehot, scale, valid = _softmax_and_scale(xf, wf, target, upstream, ignore_index)
    m = ax @ aw.T
    lse_terms = (p * m).sum(1, keepdim=True)
    n_valid = int(valid.sum())
    row_terms = lse_terms.squeeze(1) + (onehot * m).sum(1)
    loss_mag = (row_terms * valid).sum() / n_valid if n_valid else torch.zeros((), dtype=torch.float64, device=xf.device)
    weights = scale.abs() * (p * (1.0 + m + lse_terms) + onehot + tiny)
    return loss_mag, weights @ aw, weights.T @ ax


def fused_linear_ce_rounded_gradients(x: torch.Tensor, weight: torch.Tensor, upstream, tiny: float = 0.0):
    """Per check (loss, dx, dweight), what a kernel adds by rounding each gradient to the input
    dtype before the upstream scales it (Liger-Kernel's pattern: the gradients computed in the
    forward for an upstream of 1, multiplied by it in the backward), in units of that dtype's unit
    roundoff: the rounding is off by u (|g| / |upstream| + tiny), which the upstream scales. The
    relative part, u |g|, is within the output's own rounding (one ulp); below ``tiny`` (the
    dtype's smallest normal) the spacing stops shrinking, and that floor, u tiny |upstream|, is what
    the output's one ulp there does not hold."""
    up = float(torch.as_tensor(upstream, dtype=torch.float64, device=x.device).abs().max())
    return (None, torch.full(x.shape, tiny * up, dtype=torch.float64, device=x.device),
            torch.full(weight.shape, tiny * up, dtype=torch.float64, device=weight.device))
