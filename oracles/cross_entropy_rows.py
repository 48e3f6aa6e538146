"""Per-row cross-entropy with label smoothing, reference in float64
(torch.nn.functional.cross_entropy(..., reduction="none", label_smoothing=ls) semantics).

    loss_i = (1 - ls) * (lse_i - x[i, t_i]) + ls / V * sum_j (lse_i - x[i, j])   rows t_i != ignore
    loss_i = 0                                                                  ignored rows

Backward, with upstream gradient u[N] and p = softmax(x) per row, on valid rows:

    dx[i, j] = u_i * (p[i, j] - (1 - ls) [j == t_i] - ls / V)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cross_entropy_rows_reference(logits, target, ignore_index: int = -100, label_smoothing: float = 0.0):
    return F.cross_entropy(logits.to(torch.float64), target, ignore_index=ignore_index,
                           label_smoothing=label_smoothing, reduction="none")


def cross_entropy_rows_magnitudes(logits, target, upstream, ignore_index: int = -100, label_smoothing: float = 0.0):
    """Size of the terms each row's loss and gradient sum or cancel, (loss[N], dlogits[N, V]).

    As in oracles.cross_entropy: exponentiating x_j - max is exact up to a rounding of
    spread_j = max - x_j, and the normaliser carries A = sum_j p_j spread_j; lse - x_t cancels
    when the target dominates. The smoothing sum, evaluated as ls * lse - ls / V * sum_j x_j,
    cancels terms of size ls * (|lse| + mean_j |x_j|); its gradient p_j - ls / V cancels too.
    A row's loss is often formed as lse - x_t with lse = m + log(s) rounded first (torch's
    log_softmax): roundings of |lse| and |x_t|, which a confident row's tiny loss does not
    bound, so they are terms too. The gradient's c = sum_k g_k (g: the one-hot and smoothing
    weights, sum_k |g_k| = 1) is a sum over V whose rounding p_j inherits."""
    xf = logits.to(torch.float64)
    valid = (target != ignore_index).to(torch.float64)
    p = torch.softmax(xf, dim=1)
    finite = torch.isfinite(xf)
    spread = xf.amax(1, keepdim=True) - xf
    a = torch.where(p > 0, p * spread, 0.0).sum(1, keepdim=True)
    onehot = torch.zeros_like(xf)
    rows = (target != ignore_index).nonzero().squeeze(1)
    onehot[rows, target[rows]] = 1.0
    t_spread = torch.where(onehot > 0, spread, 0.0).sum(1, keepdim=True)
    lse = torch.logsumexp(xf, dim=1, keepdim=True)
    mean_abs = torch.where(finite, xf.abs(), 0.0).sum(1, keepdim=True) / xf.shape[1]
    smooth = label_smoothing * (lse.abs() + mean_abs)
    x_t = torch.where(onehot > 0, xf.abs(), 0.0).sum(1, keepdim=True)
    row = (torch.exp(-spread).sum(1, keepdim=True).log() + t_spread + a + smooth + lse.abs() + x_t).squeeze(1)
    row = torch.where(valid > 0, row, 0.0)
    u = upstream.to(torch.float64).abs().unsqueeze(1) * valid.unsqueeze(1)
    grad = u * (torch.where(p > 0, p * (2.0 + spread + a), 0.0) + onehot + label_smoothing / xf.shape[1])
    return row, grad
