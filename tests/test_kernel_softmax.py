"""kernels.softmax against the float64 oracle: irregular shapes, every dtype and layout, large
and masked logits, ties, multi-block rows; inputs left unchanged; out-of-contract inputs
rejected before any launch."""

import pytest
import torch

from kernel_checks import assert_close, assert_rejected, spread_cases
from kernels import softmax as k
from harness.ops.layouts import place

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "col_sliced", "offset")
SHAPES = ((1, 1), (1, 257), (7, 1), (3, 4097), (13, 31), (17, 130))
VALUE_KINDS = ("normal", "large", "offset", "masked", "ties")


def _values(kind, m, n, dtype, g):
    x = torch.randn(m, n, generator=g, dtype=torch.float64) * 3
    if kind == "large":
        x = x * 3e3  # spreads of thousands: every row is close to one-hot
    elif kind == "offset":
        x = x / 3 + 1e4
    elif kind == "masked":
        # masked attention scores: about half of each row at -1e9 (-6e4 in fp16, whose range
        # ends at 65504), plus row 0 masked entirely, which softmax makes uniform
        masked = torch.rand(m, n, generator=g) < 0.5
        masked[0] = True
        x[masked] = -6e4 if dtype == torch.float16 else -1e9
        if dtype == torch.float16:
            x[1:][masked[1:]] = float("-inf")  # fp16 masks are often -inf; exp(-inf - max) must be 0
    elif kind == "ties":
        x = torch.randint(0, 3, (m, n), generator=g).to(torch.float64)
    return x


def _inputs(m, n, dtype, layout, device, seed=0, kind="normal"):
    g = torch.Generator().manual_seed(seed)
    x = _values(kind, m, n, dtype, g)
    dy = torch.randn(m, n, generator=g, dtype=torch.float64) * torch.rand(m, 1, generator=g, dtype=torch.float64) * 3
    dy_layout = "transposed" if layout != "transposed" else "col_sliced"
    return place(x.to(dtype), layout, device), place(dy.to(dtype), dy_layout, device)


def _check(x, dy):
    xr = x.detach().clone().requires_grad_()
    y = k.softmax(xr)
    (dx,) = torch.autograd.grad(y, (xr,), dy)
    assert_close("softmax", (x,), dy, forward=y, dx=dx)


CASES = spread_cases(SHAPES, DTYPES, LAYOUTS, VALUE_KINDS)


@pytest.mark.parametrize("shape, dtype, layout, kind", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(shape, dtype, layout, kind, device):
    _check(*_inputs(*shape, dtype, layout, device, seed=shape[0] * 1000 + shape[1], kind=kind))


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_hazardous_values(kind, dtype, device):
    """Bug classes: no max subtraction (exp overflows at 1e4), padding loaded as 0 instead of
    -inf (a row of -1e9 then gets max 0 and sum 0), logsumexp saved instead of max and sum
    (-1e9 + log(s) rounds log(s) away), ties."""
    _check(*_inputs(6, 77, dtype, "contiguous", device, seed=11, kind=kind))


def test_multi_block_loops(device, monkeypatch):
    """Bug class: a loop over column blocks that drops the tail block or restarts its
    accumulator; MAX_BLOCK = 16 gives N = 37 three blocks, the last one partial. The masked
    rows put a first block of -inf ahead of finite values, which breaks an online softmax
    that rescales by exp(m_old - m_new) without guarding -inf - -inf."""
    monkeypatch.setattr(k, "MAX_BLOCK", 16)
    _check(*_inputs(9, 37, torch.float32, "transposed", device, seed=5))
    x, dy = _inputs(3, 40, torch.float32, "contiguous", device, seed=6)
    x[:, :16] = float("-inf")
    _check(x, dy)
    _check(*_inputs(4, 33, torch.bfloat16, "col_sliced", device, seed=7, kind="masked"))
    # the row max in the first block, 200 above the rest: a max taken over the last block
    # alone overflows exp(x - m) (softmax's shift invariance hides every other symptom)
    x, dy = _inputs(3, 40, torch.float32, "contiguous", device, seed=8)
    x[:, 2] = 200.0
    _check(x, dy)


def test_expanded_upstream_gradient(device):
    """dy with stride 0 in both dimensions, as y.sum().backward() hands it (dx is then 0)."""
    x, _ = _inputs(6, 45, torch.float32, "contiguous", device, seed=7)
    _check(x, torch.tensor(0.75, device=device).expand(6, 45))
    x, dy = _inputs(6, 45, torch.float32, "contiguous", device, seed=8)
    _check(x, dy[:1].expand(6, 45))


def test_inputs_unchanged(device):
    x, dy = _inputs(5, 33, torch.float16, "col_sliced", device, seed=9)
    before = x.clone(), dy.clone()
    xr = x.requires_grad_()
    torch.autograd.grad(k.softmax(xr), (xr,), dy)
    assert torch.equal(x.detach(), before[0]) and torch.equal(dy, before[1])


def test_empty_inputs(device):
    for shape in ((0, 8), (3, 0)):
        x = torch.ones(shape, device=device, requires_grad=True)
        y = k.softmax(x)
        assert y.shape == shape
        (dx,) = torch.autograd.grad(y, (x,), torch.ones(shape, device=device))
        assert dx.shape == shape


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: torch.ones(4, device=d), ValueError, "leading dim"),  # x[..., N]: 3-D is taken
        (lambda d: torch.ones(2, 4, device=d, dtype=torch.float64), TypeError, "float64"),
        (lambda d: torch.ones(2, 4, device=d, dtype=torch.int32), TypeError, "int32"),
        (lambda d: [[1.0, 2.0]], TypeError, "must be a tensor"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, device, monkeypatch):
    assert_rejected(k.softmax, (make(device),), error, words, module=k, monkeypatch=monkeypatch,
                    no_launch=("_softmax_forward", "_softmax_backward"))
