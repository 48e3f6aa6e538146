"""kernels.cross_entropy against the float64 oracle (torch.nn.functional.cross_entropy's
semantics): irregular shapes, every dtype and layout, ignored rows anywhere, every row
ignored, a non-unit upstream gradient, large and masked logits, ties, multi-block rows;
inputs left unchanged; out-of-contract inputs rejected before any launch."""

import math

import pytest
import torch

from kernel_checks import assert_close, assert_rejected, spread_cases
from kernels import cross_entropy as k
from harness.ops.layouts import place

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "col_sliced", "offset")
# (rows, classes): one row, one class, primes, V = 257, V = 4097 (two column blocks)
SHAPES = ((1, 1), (1, 257), (7, 1), (3, 4097), (13, 31), (17, 130))
VALUE_KINDS = ("normal", "large", "masked", "ties")

# every row ignored makes the interpreter's numpy compute 0 / 0 (NaN, as torch), and warn
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")


def _values(kind, n, v, dtype, g):
    x = torch.randn(n, v, generator=g, dtype=torch.float64) * 3
    if kind == "large":
        x = x * 3e3  # spreads of thousands: exp overflows without the max subtracted
    elif kind == "masked":
        # a row of -1e9 (-6e4 in fp16, whose range ends at 65504), as masked scores, with
        # about half of the other rows' entries masked too; row 1 is never ignored (_inputs)
        low = -6e4 if dtype == torch.float16 else -1e9
        x[torch.rand(n, v, generator=g) < 0.5] = low
        x[min(1, n - 1)] = low
    elif kind == "ties":
        x = torch.randint(0, 3, (n, v), generator=g).to(torch.float64)
    return x


def _inputs(n, v, dtype, layout, device, seed=0, kind="normal", ignore_index=-100, ignored=0.3):
    g = torch.Generator().manual_seed(seed)
    x = _values(kind, n, v, dtype, g)
    t = torch.randint(v, (n,), generator=g)
    if kind == "masked":
        # a masked target has a loss of about 1e9, which would swamp every other row's in the
        # mean (and is not what masks are for); the fully masked row keeps its ties
        hit = x[torch.arange(n), t] < -1e4
        hit[min(1, n - 1)] = False
        x[torch.arange(n)[hit], t[hit]] = 0.5
    drop = torch.rand(n, generator=g) < ignored
    if n > 2 and 0 < ignored < 1:
        drop[0] = drop[-1] = True  # the first and the last row: edges of every loop
        drop[1] = False
    t[drop] = ignore_index
    upstream = float(torch.randn((), generator=g, dtype=torch.float64) * 2)
    t_layout = "transposed" if layout in ("transposed", "col_sliced") else layout
    return place(x.to(dtype), layout, device), place(t, t_layout, device), upstream


def _check(x, t, upstream, ignore_index=-100):
    xr = x.detach().clone().requires_grad_()
    loss = k.cross_entropy(xr, t, ignore_index)
    (dx,) = torch.autograd.grad(loss, (xr,), torch.tensor(upstream, dtype=x.dtype, device=x.device))
    # the oracle gets the upstream gradient as the kernel saw it, rounded to x's dtype
    u = torch.tensor(upstream, dtype=x.dtype, device=x.device)
    assert_close("cross_entropy", (x, t, ignore_index), u, loss=loss, dlogits=dx)
    return loss, dx


CASES = spread_cases(SHAPES, DTYPES, LAYOUTS, VALUE_KINDS)


@pytest.mark.parametrize("shape, dtype, layout, kind", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(shape, dtype, layout, kind, device):
    _check(*_inputs(*shape, dtype, layout, device, seed=shape[0] * 1000 + shape[1], kind=kind))


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_hazardous_values(kind, dtype, device):
    """Bug classes: no max subtraction (exp overflows at 1e4), padding loaded as 0 instead of
    -inf, loss computed as (m + log s) - x_t (log s rounds away at -1e9), ties at the target."""
    _check(*_inputs(6, 77, dtype, "contiguous", device, seed=11, kind=kind))


@pytest.mark.parametrize("ignore_index", [-100, -1, 0, 5])
def test_ignore_index_values(ignore_index, device):
    """An ignore_index inside [0, V) (0, 5) ignores rows whose target is that class; the mean
    divides by the rows left, not by N."""
    _check(*_inputs(11, 9, torch.float32, "col_sliced", device, seed=12, ignore_index=ignore_index, ignored=0.4), ignore_index)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_row_ignored_gives_nan_and_zero_gradient(dtype, device):
    """torch returns NaN (0 / 0) here; a kernel returning 0 (Liger's choice) is a different
    contract. The gradient must be exactly zero, not NaN."""
    x, t, upstream = _inputs(5, 12, dtype, "contiguous", device, seed=13, ignored=1.0)
    loss, dx = _check(x, t, upstream)
    assert math.isnan(loss.item()) and torch.equal(dx, torch.zeros_like(dx))


def test_multi_block_loops(device, monkeypatch):
    """Bug class: a loop over column blocks (or over rows in the mean) that drops the tail
    block or restarts its accumulator: MAX_BLOCK = 16 gives V = 37 three blocks, and
    MEAN_BLOCK = 8 gives N = 21 rows three blocks, the last ones partial."""
    monkeypatch.setattr(k, "MAX_BLOCK", 16)
    monkeypatch.setattr(k, "MEAN_BLOCK", 8)
    _check(*_inputs(21, 37, torch.float32, "transposed", device, seed=5))
    _check(*_inputs(9, 33, torch.bfloat16, "offset", device, seed=6, kind="masked"))


def test_loss_is_a_scalar_of_the_logits_dtype(device):
    x, t, _ = _inputs(4, 10, torch.bfloat16, "contiguous", device, seed=14)
    loss = k.cross_entropy(x, t)
    assert loss.shape == () and loss.dtype == torch.bfloat16


def test_inputs_unchanged(device):
    x, t, upstream = _inputs(5, 33, torch.float16, "col_sliced", device, seed=9)
    before = x.clone(), t.clone()
    xr = x.requires_grad_()
    torch.autograd.grad(k.cross_entropy(xr, t), (xr,), torch.tensor(upstream, dtype=x.dtype))
    assert torch.equal(x.detach(), before[0]) and torch.equal(t, before[1])


def test_empty_batch_is_nan_like_torch(device):
    x = torch.ones(0, 8, device=device, requires_grad=True)
    loss = k.cross_entropy(x, torch.zeros(0, dtype=torch.int64, device=device))
    assert math.isnan(loss.item())
    (dx,) = torch.autograd.grad(loss, (x,))
    assert dx.shape == (0, 8)


def _t(values, d):
    return torch.tensor(values, dtype=torch.int64, device=d)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(2, 3, 4, device=d), _t([0, 1], d), -100), ValueError, "2-D"),
        (lambda d: (torch.ones(2, 0, device=d), _t([0, 1], d), -100), ValueError, "V = 0"),
        (lambda d: (torch.ones(2, 4, device=d), _t([0, 1, 2], d), -100), ValueError, "target must have shape (2,)"),
        (lambda d: (torch.ones(2, 4, device=d), _t([[0, 1]], d), -100), ValueError, "target must have shape (2,)"),
        (lambda d: (torch.ones(2, 4, device=d, dtype=torch.float64), _t([0, 1], d), -100), TypeError, "float64"),
        (lambda d: (torch.ones(2, 4, device=d), _t([0, 1], d).int(), -100), TypeError, "int64"),
        (lambda d: (torch.ones(2, 4, device=d), _t([0, 4], d), -100), ValueError, "target[1] = 4 is outside [0, 4)"),
        (lambda d: (torch.ones(2, 4, device=d), _t([-1, 0], d), -100), ValueError, "target[0] = -1"),
        (lambda d: (torch.ones(2, 4, device=d), _t([-100, 0], d), 0), ValueError, "target[0] = -100"),
        (lambda d: (torch.ones(2, 4, device=d), _t([0, 1], d), 1.5), TypeError, "ignore_index must be an int"),
        (lambda d: (torch.ones(2, 4, device=d), [0, 1], -100), TypeError, "target must be a tensor"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, device, monkeypatch):
    assert_rejected(k.cross_entropy, make(device), error, words, module=k, monkeypatch=monkeypatch,
                    no_launch=("_cross_entropy_forward", "_cross_entropy_mean", "_cross_entropy_backward"))
