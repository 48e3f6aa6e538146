"""Cross-entropy over logits, reference in float64 (torch.nn.functional.cross_entropy semantics).

    loss_i = logsumexp_j x[i, j] - x[i, t_i]                 rows with t_i != ignore_index
    loss   = sum of loss_i over valid rows / n_valid        (NaN when n_valid == 0, like torch)

Backward, with upstream gradient u of the scalar loss, p = softmax(x) per row and
s_i = u / n_valid on valid rows, 0 on ignored rows:

    dx[i, j] = s_i * (p[i, j] - [j == t_i])

With n_valid == 0 every row is ignored and the gradient is zero, as in torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cross_entropy_reference(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Forward in float64, differentiable by autograd (used for gradcheck and gradgradcheck)."""
    return F.cross_entropy(logits.to(torch.float64), target, ignore_index=ignore_index)


def _pieces(logits, target, upstream, ignore_index):
    xf = logits.to(torch.float64)
    valid = target != ignore_index
    n_valid = int(valid.sum())
    u = torch.as_tensor(upstream, dtype=torch.float64, device=xf.device)
    scale = torch.where(valid, u / max(n_valid, 1), torch.zeros((), dtype=torch.float64, device=xf.device))
    onehot = torch.zeros_like(xf)
    rows = valid.nonzero().squeeze(1)
    onehot[rows, target[rows]] = 1.0
    return xf, torch.softmax(xf, dim=1), onehot, scale.unsqueeze(1), valid


def cross_entropy_backward(
    logits: torch.Tensor, target: torch.Tensor, upstream, ignore_index: int = -100
) -> torch.Tensor:
    """The explicit gradient formula (softmax - one-hot, scaled), float64, independent of autograd."""
    _, p, onehot, scale, _ = _pieces(logits, target, upstream, ignore_index)
    return scale * (p - onehot)


def cross_entropy_magnitudes(
    logits: torch.Tensor, target: torch.Tensor, upstream, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """Size of the terms the loss and the gradient sum or cancel, (loss, dlogits).

    Any stable evaluation exponentiates x_j - max, exact up to a rounding of |x_j - max|, so
    with spread_j = max - x_j and A = sum_j p_j spread_j (the error scale of the normaliser):
      loss:    mean over valid rows of log(sum_j exp(-spread_j)) + spread_t + A
               (logsumexp - x_t can cancel to ~0 when the target dominates)
      dlogits: |s| * (p * (1 + spread + A) + onehot)   (p_t - 1 cancels when p_t ~ 1)
    Both bound their results. The loss magnitude is NaN when every row is ignored."""
    xf, p, onehot, scale, valid = _pieces(logits, target, upstream, ignore_index)
    spread = xf.amax(1, keepdim=True) - xf
    a = torch.where(p > 0, p * spread, 0.0).sum(1, keepdim=True)  # a logit of -inf: p = 0, spread = inf
    t_spread = torch.where(onehot > 0, spread, 0.0).sum(1, keepdim=True)
    row_terms = (torch.exp(-spread).sum(1, keepdim=True).log() + t_spread + a).squeeze(1)
    n_valid = int(valid.sum())
    loss_terms = (row_terms * valid).sum() / n_valid if n_valid else torch.tensor(float("nan"), dtype=torch.float64, device=row_terms.device)
    return loss_terms, scale.abs() * (torch.where(p > 0, p * (1.0 + spread + a), 0.0) + onehot)
