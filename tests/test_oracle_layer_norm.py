"""oracles.layer_norm: float64 gradcheck and gradgradcheck, the explicit backward equals
autograd, and the magnitudes bound what they describe."""

import torch

from oracles.layer_norm import (
    layer_norm_backward,
    layer_norm_backward_magnitudes,
    layer_norm_forward_magnitudes,
    layer_norm_reference,
)


def _inputs(m=4, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g, dtype=torch.float64).requires_grad_()
    w = (torch.randn(n, generator=g, dtype=torch.float64) * 0.5 + 1).requires_grad_()
    b = torch.randn(n, generator=g, dtype=torch.float64).requires_grad_()
    dy = torch.randn(m, n, generator=g, dtype=torch.float64)
    return x, w, b, dy


def test_gradcheck_and_gradgradcheck():
    x, w, b, _ = _inputs()
    f = lambda x, w, b: layer_norm_reference(x, w, b, 1e-5)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, w, b))
    assert torch.autograd.gradgradcheck(f, (x, w, b))


def test_explicit_backward_matches_autograd():
    x, w, b, dy = _inputs(9, 257, seed=1)
    y = layer_norm_reference(x, w, b, 1e-5)
    auto = torch.autograd.grad(y, (x, w, b), dy)
    for explicit, a in zip(layer_norm_backward(x, w, b, 1e-5, dy), auto):
        torch.testing.assert_close(explicit, a, rtol=1e-12, atol=1e-12)


def test_forward_matches_torch_and_uses_population_variance():
    x, w, b, _ = _inputs(3, 5, seed=2)
    torch.testing.assert_close(
        layer_norm_reference(x, w, b, 1e-5), torch.nn.functional.layer_norm(x, (5,), w, b, 1e-5), rtol=1e-12, atol=1e-12
    )
    row = torch.tensor([[1.0, 3.0]], dtype=torch.float64)  # mu 2, population var 1
    y = layer_norm_reference(row, torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), 1e-12)
    torch.testing.assert_close(y, torch.tensor([[-1.0, 1.0]], dtype=torch.float64))


def test_magnitudes_bound_the_results():
    x, w, b, dy = _inputs(5, 11, seed=3)
    x = x.detach() + 100.0
    assert (layer_norm_reference(x, w, b, 1e-5).abs() <= layer_norm_forward_magnitudes(x, w, b, 1e-5) + 1e-12).all()
    for result, mag in zip(layer_norm_backward(x, w, b, 1e-5, dy), layer_norm_backward_magnitudes(x, w, b, 1e-5, dy)):
        assert (result.abs() <= mag + 1e-12).all()
    # the offset is what the forward magnitude carries: about 2 * 100 / std per unit weight
    assert layer_norm_forward_magnitudes(x, w, b, 1e-5).min() > 50
