"""oracles.rmsnorm: float64 gradcheck and gradgradcheck, and the explicit backward formula."""

import torch

from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference


def _inputs(m=5, n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g, dtype=torch.float64, requires_grad=True)
    gamma = (torch.randn(n, generator=g, dtype=torch.float64) * 0.5 + 1).requires_grad_()
    return x, gamma


def test_gradcheck_and_gradgradcheck():
    x, gamma = _inputs()
    assert torch.autograd.gradcheck(lambda a, b: rmsnorm_reference(a, b, 1e-6), (x, gamma))
    assert torch.autograd.gradgradcheck(lambda a, b: rmsnorm_reference(a, b, 1e-6), (x, gamma))


def test_explicit_backward_matches_autograd():
    x, gamma = _inputs(17, 257, seed=1)
    dy = torch.randn(17, 257, dtype=torch.float64)
    y = rmsnorm_reference(x, gamma, 1e-5)
    dx_auto, dg_auto = torch.autograd.grad(y, (x, gamma), dy)
    dx, dg = rmsnorm_backward(x, gamma, dy, 1e-5)
    torch.testing.assert_close(dx, dx_auto, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dg, dg_auto, rtol=1e-12, atol=1e-12)


def test_worked_example_from_the_tutorial():
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    y = rmsnorm_reference(x, torch.tensor([2.0, 0.5], dtype=torch.float64), 1e-6)
    torch.testing.assert_close(y, torch.tensor([[1.697056, 0.565685]], dtype=torch.float64), atol=1e-6, rtol=0)
    dx, _ = rmsnorm_backward(x, torch.ones(2, dtype=torch.float64), torch.tensor([[1.0, 2.0]], dtype=torch.float64), 1e-6)
    torch.testing.assert_close(dx, torch.tensor([[-0.090510, 0.067882]], dtype=torch.float64), atol=1e-6, rtol=0)


def test_magnitudes_bound_the_results():
    x, gamma = _inputs(4, 9)
    dy = torch.randn(4, 9, dtype=torch.float64)
    dx, dg = rmsnorm_backward(x, gamma, dy, 1e-6)
    mdx, mdg = rmsnorm_backward_magnitudes(x, gamma, dy, 1e-6)
    assert (dx.abs() <= mdx + 1e-12).all() and (dg.abs() <= mdg + 1e-12).all()
