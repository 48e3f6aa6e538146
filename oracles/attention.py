"""Scaled dot-product attention, reference in float64 (plain torch, no SDPA).

With G = Hq / Hkv query heads per key/value head (grouped-query attention; Hkv = 1 is
multi-query), query head h reads key/value head h // G:

    s_ij = scale * q_i . k_j                          [B, Hq, S, T]
    allowed(i, j) = j <= i + (T - S)   if causal      (the diagonal aligned to the bottom right:
                    always             otherwise       a query block of a longer sequence, or
                                                       decoding with S = 1 sees every key)
    p_ij = exp(s_ij - m_i) / sum_{allowed k} exp(s_ik - m_i)   over allowed j, 0 elsewhere
    o_i  = sum_j p_ij v_j

A query row that allows no key (causal with S > T: rows i < S - T) has p = 0 and o = 0, the
output FlashAttention gives such rows; its gradients are 0 as well.

Backward (derivation: d p_ij / d s_ik = p_ij (delta_jk - p_ik)), with dp_ij = do_i . v_j and
Delta_i = do_i . o_i = sum_j p_ij dp_ij:

    ds_ij = p_ij (dp_ij - Delta_i)
    dq_i  = scale * sum_j ds_ij k_j
    dk_j  = scale * sum over the G query heads of the group and over i of ds_ij q_i
    dv_j  = sum over the group's heads and over i of p_ij do_i
"""

from __future__ import annotations

import torch


def allowed_keys(s: int, t: int, causal: bool, device=None) -> torch.Tensor:
    """[S, T] bool: which keys each query sees (module docstring)."""
    if not causal:
        return torch.ones((s, t), dtype=torch.bool, device=device)
    i = torch.arange(s, device=device).unsqueeze(1)
    j = torch.arange(t, device=device).unsqueeze(0)
    return j <= i + (t - s)


def _heads(x: torch.Tensor, hq: int) -> torch.Tensor:
    """[B, Hkv, T, D] -> [B, Hq, T, D]: each key/value head repeated for its G query heads."""
    return x.repeat_interleave(hq // x.shape[1], dim=1)


def _probabilities(q, k, causal: bool, scale: float):
    """(p [B, Hq, S, T] float64, scores, allowed): masked entries and rows without any key give 0."""
    qf, kf = q.to(torch.float64), _heads(k.to(torch.float64), q.shape[1])
    scores = scale * (qf @ kf.transpose(-1, -2))
    allowed = allowed_keys(q.shape[2], k.shape[2], causal, q.device)
    m = torch.where(allowed, scores, float("-inf")).amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # a row without keys (or S or T = 0)
    # softmax is invariant to m, so it is a constant here; masked entries are exp(0) before the where
    e = torch.where(allowed, torch.exp(torch.where(allowed, scores, m) - m), 0.0)
    total = e.sum(-1, keepdim=True)
    p = e / torch.where(total > 0, total, torch.ones_like(total))
    return p, scores, allowed


def attention_reference(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    """o [B, Hq, S, D] in float64, differentiable by autograd in q, k and v."""
    p, _, _ = _probabilities(q, k, causal, scale)
    return p @ _heads(v.to(torch.float64), q.shape[1])


def _group_sum(x: torch.Tensor, hkv: int) -> torch.Tensor:
    """[B, Hq, ...] -> [B, Hkv, ...]: the sum over each key/value head's G query heads."""
    b, hq = x.shape[:2]
    return x.reshape(b, hkv, hq // hkv, *x.shape[2:]).sum(2)


def attention_backward(q, k, v, causal: bool, scale: float, do):
    """(dq, dk, dv) in float64 by the explicit formulas of the module docstring."""
    hq, hkv = q.shape[1], k.shape[1]
    p, _, _ = _probabilities(q, k, causal, scale)
    qf, dof = q.to(torch.float64), do.to(torch.float64)
    kf, vf = _heads(k.to(torch.float64), hq), _heads(v.to(torch.float64), hq)
    o = p @ vf
    dp = dof @ vf.transpose(-1, -2)
    delta = (dof * o).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    dq = scale * (ds @ kf)
    dk = _group_sum(scale * (ds.transpose(-1, -2) @ qf), hkv)
    dv = _group_sum(p.transpose(-1, -2) @ dof, hkv)
    return dq, dk, dv


def _relative_scale(q, k, causal: bool, scale: float):
    """(p, e): e_ij bounds, in roundings, the relative error of a finite-precision p_ij.

    A kernel forms s_ij as a sum over D of products, off by roundings of a_ij = |scale| sum_d
    |q_id k_jd|; the max m_i it subtracts carries its own (A_i, the largest a_ij of the row),
    and the subtraction one of |s_ij - m_i|; exp turns each into a relative error of that size
    in exp(s_ij - m_i): r_ij = 1 + a_ij + A_i + |s_ij - m_i|. The normaliser sums those terms
    weighted by p, so e_ij = r_ij + sum_k p_ik r_ik (as oracles.softmax, with the scores'
    own rounding added)."""
    p, scores, allowed = _probabilities(q, k, causal, scale)
    qa = q.to(torch.float64).abs()
    ka = _heads(k.to(torch.float64).abs(), q.shape[1])
    a = abs(scale) * (qa @ ka.transpose(-1, -2))
    a = torch.where(allowed, a, 0.0)
    big = a.amax(-1, keepdim=True) if a.shape[-1] else torch.zeros_like(a[..., :1])
    m = torch.where(allowed, scores, float("-inf")).amax(-1, keepdim=True) if a.shape[-1] else big
    gap = torch.where(allowed & (p > 0), (scores - m).abs(), 0.0)
    r = 1.0 + a + big + gap
    e = r + (p * r).sum(-1, keepdim=True)
    return p, torch.where(p > 0, e, 0.0)


def attention_forward_magnitudes(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    """sum_j p_ij e_ij |v_jd|: the size of the error terms of o_id (see _relative_scale)."""
    p, e = _relative_scale(q, k, causal, scale)
    return (p * e) @ _heads(v.to(torch.float64).abs(), q.shape[1])


def attention_backward_magnitudes(q, k, v, causal: bool, scale: float, do):
    """The size of the terms dq, dk and dv sum or cancel, the error of p carried along:
    ds_ij = p_ij (dp_ij - Delta_i) cancels |dp_ij| + |Delta_i|, each formed as a sum over D
    (sum_d |do_id v_jd| and sum_d |do_id| |o|-terms), with p's relative error e_ij on top."""
    hq, hkv = q.shape[1], k.shape[1]
    p, e = _relative_scale(q, k, causal, scale)
    qf, dof = q.to(torch.float64), do.to(torch.float64)
    vf = _heads(v.to(torch.float64), hq)
    o = p @ vf
    dp = dof @ vf.transpose(-1, -2)
    delta = (dof * o).sum(-1, keepdim=True)
    dp_terms = dof.abs() @ vf.abs().transpose(-1, -2)
    delta_terms = (dof.abs() * ((p * e) @ vf.abs())).sum(-1, keepdim=True)
    ds = p * (e * (dp.abs() + delta.abs()) + dp_terms + delta_terms)
    ka = _heads(k.to(torch.float64).abs(), hq)
    dq = abs(scale) * (ds @ ka)
    dk = _group_sum(abs(scale) * (ds.transpose(-1, -2) @ qf.abs()), hkv)
    dv = _group_sum((p * e).transpose(-1, -2) @ dof.abs(), hkv)
    return dq, dk, dv
