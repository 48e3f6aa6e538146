"""oracles.fused_linear_ce: agrees with torch, its explicit gradients with autograd, gradcheck,
torch's all-ignored semantics, and magnitudes that bound what they describe."""

import pytest
import torch
import torch.nn.functional as F

from oracles.fused_linear_ce import fused_linear_ce_backward, fused_linear_ce_magnitudes, fused_linear_ce_reference


def _inputs(n=6, d=5, v=7, ignore_index=-100, ignored=(1,), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(v, d, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randint(v, (n,), generator=g)
    t[list(ignored)] = ignore_index
    return x, w, t


@pytest.mark.parametrize("ignore_index", [-100, -1, 0, 6])
def test_reference_is_torch_cross_entropy_of_the_logits(ignore_index):
    x, w, t = _inputs(ignore_index=ignore_index)
    expected = F.cross_entropy(x @ w.T, t, ignore_index=ignore_index)
    torch.testing.assert_close(fused_linear_ce_reference(x, w, t, ignore_index), expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("ignore_index, ignored", [(-100, ()), (-100, (0, 3)), (0, (2,)), (-1, (1, 4, 5))])
def test_explicit_gradients_match_autograd_with_upstream_not_one(ignore_index, ignored):
    """Bug class: softmax - onehot scaled by 1/N instead of upstream / n_valid."""
    x, w, t = _inputs(n=9, d=6, v=11, ignore_index=ignore_index, ignored=ignored, seed=3)
    upstream = torch.tensor(-2.75, dtype=torch.float64)
    loss = fused_linear_ce_reference(x, w, t, ignore_index)
    dx_auto, dw_auto = torch.autograd.grad(loss, (x, w), upstream)
    dx, dw = fused_linear_ce_backward(x, w, t, upstream, ignore_index)
    torch.testing.assert_close(dx, dx_auto, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(dw, dw_auto, rtol=1e-12, atol=1e-14)


def test_gradcheck_small_shapes():
    x, w, t = _inputs(n=4, d=3, v=5, ignored=(2,))
    assert torch.autograd.gradcheck(lambda a, b: fused_linear_ce_reference(a, b, t), (x, w))


def test_all_ignored_follows_torch_nan_loss_and_zero_gradients():
    x, w, t = _inputs(n=3, ignored=(0, 1, 2))
    loss = fused_linear_ce_reference(x, w, t)
    assert torch.isnan(loss) and torch.isnan(F.cross_entropy(x @ w.T, t))
    dx, dw = fused_linear_ce_backward(x, w, t, torch.tensor(1.5, dtype=torch.float64))
    assert not dx.any() and not dw.any()
    dx_auto, dw_auto = torch.autograd.grad(loss, (x, w), torch.tensor(1.5, dtype=torch.float64))
    assert torch.equal(dx, dx_auto) and torch.equal(dw, dw_auto)


def test_magnitudes_bound_the_results():
    x, w, t = _inputs(n=8, d=4, v=9, ignored=(0, 5), seed=7)
    u = torch.tensor(0.8, dtype=torch.float64)
    loss = fused_linear_ce_reference(x, w, t)
    dx, dw = fused_linear_ce_backward(x, w, t, u)
    ml, mdx, mdw = fused_linear_ce_magnitudes(x, w, t, u)
    assert loss.abs() <= ml + 1e-12
    assert (dx.abs() <= mdx + 1e-12).all() and (dw.abs() <= mdw + 1e-12).all()
