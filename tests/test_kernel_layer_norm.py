"""kernels.layer_norm against the float64 oracle: irregular shapes, every dtype and layout,
offset and constant rows, multi-block rows; inputs left unchanged; out-of-contract inputs
rejected before any launch."""

import pytest
import torch

from kernel_checks import assert_close, assert_rejected, spread_cases
from kernels import layer_norm as k
from harness.ops.layouts import place

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "col_sliced", "offset")
# M = 1 and N = 1 edges, primes, N = 257 (one past a power of two), N = 4097 (two column blocks)
SHAPES = ((1, 1), (1, 257), (7, 1), (3, 4097), (13, 31), (17, 130))
EPS = 1e-5


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _inputs(m, n, dtype, layout, device, seed=0, rows="normal"):
    g = _gen(seed)
    x = torch.randn(m, n, generator=g, dtype=torch.float64)
    if rows == "offset":
        x = x + 1e4  # a large common offset against a spread of 1: E[x^2] - mu^2 would cancel to noise
    elif rows == "constant":
        x = torch.randn(m, 1, generator=g, dtype=torch.float64).expand(m, n).clone()
    w = torch.randn(n, generator=g, dtype=torch.float64) * 0.5 + 1.0
    b = torch.randn(n, generator=g, dtype=torch.float64)
    dy = torch.randn(m, n, generator=g, dtype=torch.float64) * torch.rand(m, 1, generator=g, dtype=torch.float64) * 3
    vector_layout = {"transposed": "transposed", "col_sliced": "col_sliced"}.get(layout, "contiguous")
    return (
        place(x.to(dtype), layout, device),
        place(w.to(dtype), vector_layout, device),
        place(b.to(dtype), "offset" if layout == "offset" else "contiguous", device),
        place(dy.to(dtype), "transposed" if layout != "transposed" else "col_sliced", device),
    )


def _check(x, w, b, dy, eps=EPS):
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = k.layer_norm(xr, wr, br, eps)
    dx, dw, db = torch.autograd.grad(y, (xr, wr, br), dy)
    assert_close("layer_norm", (x, w, b, eps), dy, forward=y, dx=dx, dweight=dw, dbias=db)


CASES = spread_cases(SHAPES, DTYPES, LAYOUTS)


@pytest.mark.parametrize("shape, dtype, layout", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(shape, dtype, layout, device):
    _check(*_inputs(*shape, dtype, layout, device, seed=shape[0] * 1000 + shape[1]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_common_offset(dtype, device):
    """Bug class: one-pass variance E[x^2] - mu^2, which loses every digit of a spread of 1
    under an offset of 1e4 (x^2 ~ 1e8 has an fp32 ulp of 8)."""
    _check(*_inputs(5, 300, dtype, "contiguous", device, seed=3, rows="offset"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_rows(dtype, device):
    """var = 0: y must be bias exactly where x - mu is exactly 0, and eps alone bounds r."""
    x, w, b, dy = _inputs(4, 100, dtype, "col_sliced", device, seed=4, rows="constant")
    _check(x, w, b, dy)


def test_multi_block_loops_and_partials(device, monkeypatch):
    """Bug class: a loop over column blocks that drops the tail block or restarts its
    accumulator; MAX_BLOCK = 16 gives N = 37 three blocks, the last one partial."""
    monkeypatch.setattr(k, "MAX_BLOCK", 16)
    _check(*_inputs(9, 37, torch.float32, "transposed", device, seed=5))
    _check(*_inputs(2, 16, torch.float16, "offset", device, seed=6))


def test_expanded_upstream_gradient(device):
    """dy with stride 0 in both dimensions, as y.sum().backward() hands it."""
    x, w, b, _ = _inputs(6, 45, torch.float32, "contiguous", device, seed=7)
    _check(x, w, b, torch.tensor(0.75, device=device).expand(6, 45))


def test_large_eps_is_used(device):
    """Bug class: eps dropped or added outside the root; visible when eps is comparable to var."""
    _check(*_inputs(3, 50, torch.float32, "contiguous", device, seed=8), eps=0.5)


def test_inputs_unchanged_and_only_requested_grads(device):
    x, w, b, dy = _inputs(5, 33, torch.float16, "col_sliced", device, seed=9)
    before = [t.clone() for t in (x, w, b, dy)]
    xr = x.requires_grad_()
    y = k.layer_norm(xr, w, b, EPS)
    (dx,) = torch.autograd.grad(y, (xr,), dy)
    for t, t0 in zip((x, w, b, dy), before):
        assert torch.equal(t.detach(), t0)
    assert_close("layer_norm", (x.detach(), w, b, EPS), dy, dx=dx)


def test_empty_batch(device):
    x = torch.ones(0, 8, device=device, requires_grad=True)
    w = torch.randn(8, device=device, requires_grad=True)
    y = k.layer_norm(x, w, torch.zeros(8, device=device), EPS)
    assert y.shape == (0, 8)
    dx, dw = torch.autograd.grad(y.sum(), (x, w))
    assert dx.shape == (0, 8) and torch.equal(dw, torch.zeros(8, device=device))


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(4, device=d), torch.ones(4, device=d), torch.ones(4, device=d), 1e-5), ValueError,
         "leading dim"),  # x[..., N]: 3-D is taken
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, device=d), torch.ones(4, device=d), 1e-5), ValueError, "weight must have shape (4,)"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), torch.ones(1, 4, device=d), 1e-5), ValueError, "bias must have shape (4,)"),
        (lambda d: (torch.ones(2, 0, device=d), torch.ones(0, device=d), torch.ones(0, device=d), 1e-5), ValueError, "N = 0"),
        (lambda d: (torch.ones(2, 4, device=d, dtype=torch.float64), torch.ones(4, device=d, dtype=torch.float64), torch.ones(4, device=d, dtype=torch.float64), 1e-5), TypeError, "float64"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d, dtype=torch.float16), torch.ones(4, device=d), 1e-5), TypeError, "cast weight"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), torch.ones(4, device=d, dtype=torch.bfloat16), 1e-5), TypeError, "cast bias"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), torch.ones(4, device=d), 0.0), ValueError, "eps must be"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), torch.ones(4, device=d), float("inf")), ValueError, "eps must be"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), torch.ones(4, device=d), True), ValueError, "eps must be"),
        (lambda d: (torch.ones(2, 4, device=d), [1.0] * 4, torch.ones(4, device=d), 1e-5), TypeError, "weight must be a tensor"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, device, monkeypatch):
    assert_rejected(k.layer_norm, make(device), error, words, module=k, monkeypatch=monkeypatch,
                    no_launch=("_layer_norm_forward", "_layer_norm_backward_dx", "_layer_norm_backward_dwdb", "_sum_partials"))
