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


def test_an_ignored_row_holding_a_nan_expects_its_exact_zero_gradient_and_accepts_torchs_nan():
    # bug class: failing the exact answer (0: the loss does not depend on an ignored row; Liger
    # returns it) because torch's formula gives 0 * NaN there, or accepting NaN on finite rows
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY, load_builtin_ops
    from harness.ops import checks

    load_builtin_ops()
    spec = REGISTRY.op("cross_entropy")
    case = Case.parse("cross_entropy:N=7,V=2,dtype=float32,layout=contiguous,values=nonfinite,"
                      "ignore_index=-100,ignored=some,seed=3019")
    inputs = spec.make_inputs(case, "cpu")
    logits, target, ignore_index = inputs.args
    bad = ~torch.isfinite(logits).all(1)
    assert bool(bad[0]) and int(target[0]) == ignore_index  # the case this guards: a NaN in an ignored row
    expected = spec.oracle(inputs)
    assert torch.equal(expected["dlogits"][0], torch.zeros(2, dtype=torch.float64))
    assert expected["dlogits_nan_ok"][0].all() and not expected["dlogits_nan_ok"][1:].any()
    x = logits.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(x, target, ignore_index=ignore_index).backward(inputs.upstream)
    tol = spec.tolerance("dlogits", case, torch.float32)
    mag = expected["dlogits_magnitude"]
    assert torch.isnan(x.grad[0]).all()
    assert checks.values(x.grad, expected["dlogits"], torch.float32, tol, mag, expected["dlogits_nan_ok"]).passed  # torch
    exact = torch.where(bad[:, None], torch.zeros_like(x.grad), x.grad)
    assert checks.values(exact, expected["dlogits"], torch.float32, tol, mag, expected["dlogits_nan_ok"]).passed  # 0
    leaked = exact.clone()
    leaked[6] = float("nan")  # row 6 is ignored too, but its logits are finite
    assert int(target[6]) == ignore_index
    assert not checks.values(leaked, expected["dlogits"], torch.float32, tol, mag, expected["dlogits_nan_ok"]).passed
