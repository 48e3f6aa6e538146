"""oracles.softmax: float64 gradcheck and gradgradcheck, the explicit backward equals
autograd, and the magnitudes bound what they describe."""

import torch

from oracles.softmax import softmax_backward, softmax_backward_magnitudes, softmax_forward_magnitudes, softmax_reference


def _inputs(m=4, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(m, n, generator=g, dtype=torch.float64) * 3).requires_grad_()
    return x, torch.randn(m, n, generator=g, dtype=torch.float64)


def test_gradcheck_and_gradgradcheck():
    x, _ = _inputs()
    assert torch.autograd.gradcheck(softmax_reference, (x,))
    assert torch.autograd.gradgradcheck(softmax_reference, (x,))


def test_explicit_backward_matches_autograd():
    x, dy = _inputs(9, 257, seed=1)
    (auto,) = torch.autograd.grad(softmax_reference(x), (x,), dy)
    torch.testing.assert_close(softmax_backward(x, dy), auto, rtol=1e-12, atol=1e-12)


def test_rows_of_large_negative_values_keep_their_distribution():
    x = torch.tensor([[-1e9, -1e9, -1e9 + 64.0, -1e9]])
    y = softmax_reference(x)
    torch.testing.assert_close(y.sum(-1), torch.ones(1, dtype=torch.float64))
    assert y[0, 0] == y[0, 1] and y[0, 2] > 0.99


def test_magnitudes_bound_the_results():
    x, dy = _inputs(5, 11, seed=3)
    x = x.detach()
    assert (softmax_reference(x) <= softmax_forward_magnitudes(x)).all()
    assert (softmax_backward(x, dy).abs() <= softmax_backward_magnitudes(x, dy) + 1e-15).all()
