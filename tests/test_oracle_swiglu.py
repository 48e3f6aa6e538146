"""oracles.swiglu: float64 gradcheck and gradgradcheck, the explicit backward equals
autograd, and the magnitudes bound what they describe."""

import torch

from oracles.swiglu import swiglu_backward, swiglu_backward_magnitudes, swiglu_reference


def _inputs(m=4, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, n, generator=g, dtype=torch.float64) * 3).requires_grad_()
    b = torch.randn(m, n, generator=g, dtype=torch.float64).requires_grad_()
    return a, b, torch.randn(m, n, generator=g, dtype=torch.float64)


def test_gradcheck_and_gradgradcheck():
    a, b, _ = _inputs()
    assert torch.autograd.gradcheck(swiglu_reference, (a, b))
    assert torch.autograd.gradgradcheck(swiglu_reference, (a, b))


def test_explicit_backward_matches_autograd_including_huge_gates():
    a, b, dy = _inputs(9, 257, seed=1)
    with torch.no_grad():
        a[0, :10] = 100.0
        a[1, :10] = -100.0
    auto = torch.autograd.grad(swiglu_reference(a, b), (a, b), dy)
    for explicit, ref in zip(swiglu_backward(a, b, dy), auto):
        torch.testing.assert_close(explicit, ref, rtol=1e-12, atol=1e-12)


def test_matches_torch_silu():
    a, b, _ = _inputs(3, 5, seed=2)
    torch.testing.assert_close(swiglu_reference(a, b), torch.nn.functional.silu(a) * b, rtol=1e-12, atol=1e-12)


def test_magnitudes_bound_the_results():
    a, b, dy = _inputs(5, 11, seed=3)
    a, b = a.detach(), b.detach()
    a[0, 0] = -1.2784645  # d silu / d a = 0 here: da cancels, its terms do not
    da, db = swiglu_backward(a, b, dy)
    mda, mdb = swiglu_backward_magnitudes(a, b, dy)
    assert (da.abs() <= mda + 1e-15).all() and (db.abs() <= mdb + 1e-15).all()
    assert da[0, 0].abs() < 1e-6 * mda[0, 0]
