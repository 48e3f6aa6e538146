"""kernels.swiglu against the float64 oracle: irregular shapes, every dtype and layout, huge
gates of both signs, the cancellation point of da, partial tiles on both grid axes; inputs
left unchanged; out-of-contract inputs rejected before any launch."""

import pytest
import torch
import triton
import triton.language as tl

from kernel_checks import assert_close, assert_rejected, spread_cases
from kernels import swiglu as k
from harness.ops.layouts import place

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "col_sliced", "offset")
# M = 1 and N = 1 edges, primes, N = 257, N = 4097 (five column blocks of 1024)
SHAPES = ((1, 1), (1, 257), (7, 1), (3, 4097), (13, 31), (17, 130))


@triton.jit
def _exp_probe(X, Y, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, k._exp_nonpositive(tl.load(X + i)))


def test_exp_helper_is_accurate_where_a_rounded_exponent_is_not():
    """exp(x) for x in [-87, 0] to a few ulps, where exp2(fl(x * log2 e)) (what tl.exp does on a
    GPU) is off by about |x| ulps: the fma correction is what keeps sigmoid(-80) right."""
    x = torch.cat([-torch.rand(4093, generator=torch.Generator().manual_seed(0)) * 87,
                   torch.tensor([0.0, -1e-30, -87.0])])
    y = torch.empty_like(x)
    _exp_probe[(1,)](x, y, x.numel())
    exact = torch.exp(x.double())
    ulps = ((y.double() - exact).abs() / exact / 2.0**-24).max().item()
    rounded_exponent = ((torch.exp2((x * 1.4426950408889634).double()) - exact).abs() / exact / 2.0**-24).max().item()
    assert ulps <= 4.0, ulps
    assert rounded_exponent > 30.0  # the error the helper exists to remove is real on this range


def _inputs(m, n, dtype, a_layout, b_layout, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, n, generator=g, dtype=torch.float64) * 3
    # gates of +-100 (sigmoid saturates: exp(-a) over- or underflows in fp32), and the minimum
    # of silu near a = -1.28 where da's two terms cancel
    special = torch.tensor([100.0, -100.0, -1.2784645, 30.0, -30.0], dtype=torch.float64)
    pick = torch.rand(m, n, generator=g) < 0.2
    a[pick] = special[torch.randint(len(special), (int(pick.sum()),), generator=g)]
    b = torch.randn(m, n, generator=g, dtype=torch.float64)
    dy = torch.randn(m, n, generator=g, dtype=torch.float64) * torch.rand(m, 1, generator=g, dtype=torch.float64) * 3
    dy_layout = "transposed" if a_layout != "transposed" else "col_sliced"
    return place(a.to(dtype), a_layout, device), place(b.to(dtype), b_layout, device), place(dy.to(dtype), dy_layout, device)


def _check(a, b, dy):
    ar, br = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    y = k.swiglu(ar, br)
    da, db = torch.autograd.grad(y, (ar, br), dy)
    assert_close("swiglu", (a, b), dy, forward=y, da=da, db=db)


CASES = spread_cases(SHAPES, DTYPES, LAYOUTS, LAYOUTS[1:] + LAYOUTS[:1])  # the fourth item: b's layout


@pytest.mark.parametrize("shape, dtype, a_layout, b_layout", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(shape, dtype, a_layout, b_layout, device):
    _check(*_inputs(*shape, dtype, a_layout, b_layout, device, seed=shape[0] * 1000 + shape[1]))


def test_partial_tiles_on_both_grid_axes(device, monkeypatch):
    """Bug class: a grid with floor division or a mask on one axis only; [4, 16] tiles give
    M = 9, N = 37 three partial tiles along each axis."""
    monkeypatch.setattr(k, "MAX_BLOCK", 16)
    monkeypatch.setattr(k, "TILE", 64)
    _check(*_inputs(9, 37, torch.float32, "transposed", "col_sliced", device, seed=5))
    _check(*_inputs(5, 16, torch.bfloat16, "offset", "contiguous", device, seed=6))


def test_a_and_b_are_not_swapped(device):
    """Bug class: silu applied to b instead of a; with b = 1 the two differ unless a = b."""
    a = torch.tensor([[-2.0, 0.5, 3.0]], device=device)
    y = k.swiglu(a, torch.ones_like(a))
    torch.testing.assert_close(y, torch.nn.functional.silu(a))


def test_expanded_upstream_gradient(device):
    """dy with stride 0 in both dimensions, as y.sum().backward() hands it."""
    a, b, _ = _inputs(6, 45, torch.float32, "contiguous", "contiguous", device, seed=7)
    _check(a, b, torch.tensor(0.75, device=device).expand(6, 45))


def test_inputs_unchanged(device):
    a, b, dy = _inputs(5, 33, torch.float16, "col_sliced", "transposed", device, seed=9)
    before = [t.clone() for t in (a, b, dy)]
    ar, br = a.requires_grad_(), b.requires_grad_()
    torch.autograd.grad(k.swiglu(ar, br), (ar, br), dy)
    for t, t0 in zip((a, b, dy), before):
        assert torch.equal(t.detach(), t0)


def test_empty_inputs(device):
    for shape in ((0, 8), (3, 0)):
        a = torch.ones(shape, device=device, requires_grad=True)
        y = k.swiglu(a, torch.ones(shape, device=device))
        assert y.shape == shape
        (da,) = torch.autograd.grad(y, (a,), torch.ones(shape, device=device))
        assert da.shape == shape


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(4, device=d), torch.ones(4, device=d)), ValueError, "leading dim"),  # 3-D is taken
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(2, 5, device=d)), ValueError, "b must have a's shape (2, 4)"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d)), ValueError, "b must have a's shape"),
        (lambda d: (torch.ones(2, 4, device=d, dtype=torch.float64), torch.ones(2, 4, device=d, dtype=torch.float64)), TypeError, "float64"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(2, 4, device=d, dtype=torch.float16)), TypeError, "cast b"),
        (lambda d: (torch.ones(2, 4, device=d), 1.0), TypeError, "b must be a tensor"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, device, monkeypatch):
    assert_rejected(k.swiglu, make(device), error, words, module=k, monkeypatch=monkeypatch,
                    no_launch=("_swiglu_forward", "_swiglu_backward"))
