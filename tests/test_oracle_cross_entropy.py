"""oracles.cross_entropy: float64 gradcheck and gradgradcheck, the explicit backward equals
autograd (ignored rows, a non-unit upstream gradient, every row ignored), and the
magnitudes bound what they describe."""

import math

import torch

from oracles.cross_entropy import cross_entropy_backward, cross_entropy_magnitudes, cross_entropy_reference


def _inputs(n=5, v=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, v, generator=g, dtype=torch.float64) * 3).requires_grad_()
    t = torch.randint(v, (n,), generator=g)
    t[1] = -100
    return x, t


def test_gradcheck_and_gradgradcheck():
    x, t = _inputs()
    f = lambda x: cross_entropy_reference(x, t)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def test_explicit_backward_matches_autograd():
    x, t = _inputs(9, 257, seed=1)
    t[-1] = 3
    for ignore_index in (-100, 3):
        t = torch.where(t == -100, ignore_index, t)
        loss = cross_entropy_reference(x, t, ignore_index)
        (auto,) = torch.autograd.grad(loss, (x,), torch.tensor(-2.5, dtype=torch.float64))
        torch.testing.assert_close(cross_entropy_backward(x, t, -2.5, ignore_index), auto, rtol=1e-12, atol=1e-12)


def test_every_row_ignored_gives_nan_and_zero_gradient():
    x, _ = _inputs()
    t = torch.full((5,), -100)
    assert math.isnan(cross_entropy_reference(x, t).item())
    assert torch.equal(cross_entropy_backward(x, t, 1.0), torch.zeros(5, 7, dtype=torch.float64))


def test_magnitudes_bound_the_results():
    x, t = _inputs(6, 11, seed=3)
    x = x.detach() + 50.0
    loss_terms, dx_terms = cross_entropy_magnitudes(x, t, -1.5)
    assert cross_entropy_reference(x, t).abs() <= loss_terms
    assert (cross_entropy_backward(x, t, -1.5).abs() <= dx_terms + 1e-15).all()
    # shift invariance: the common offset of 50 adds nothing to either
    loss0, dx0 = cross_entropy_magnitudes(x - 50.0, t, -1.5)
    torch.testing.assert_close(loss_terms, loss0)
    torch.testing.assert_close(dx_terms, dx0)
