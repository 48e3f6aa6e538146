"""kernels.rope against the float64 oracle: both conventions, position offsets, irregular head
dims (2, 6, 34, 130), B = 1, strided x and tables; wrong twins (offset ignored, conventions
swapped, the sine's sign flipped) fail the same checks; out-of-contract inputs rejected before
any launch."""

import pytest
import torch

from harness.testing import assert_kernel
from kernel_checks import assert_close, assert_rejected
from kernels import rope as k
from harness.ops.layouts import place

# (B, S, H, D): D = 2, 6, 34, 130 beside a power of two; B = 1; S * H rows not a tile multiple
SHAPES = ((1, 5, 3, 2), (2, 7, 1, 6), (1, 3, 4, 34), (3, 2, 2, 130), (1, 9, 2, 64))
CASES = [(shape, dtype, layout, offset, inter)
         for i, (shape, dtype, layout) in enumerate(zip(
             SHAPES, (torch.float32, torch.bfloat16, torch.float16, torch.float32, torch.bfloat16),
             ("contiguous", "permuted", "transposed", "col_sliced", "offset")))
         for offset, inter in (((0, 0), (37, 1)) if i % 2 else ((1, 1), (5, 0)))]


def _inputs(shape, dtype, layout, offset, device, seed=0):
    b, s, h, d = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, s, h, d, generator=g, dtype=torch.float64)
    cos = torch.randn(offset + s + 3, d // 2, generator=g, dtype=torch.float64)
    sin = torch.randn(offset + s + 3, d // 2, generator=g, dtype=torch.float64)
    dy = torch.randn(b, s, h, d, generator=g, dtype=torch.float64)
    table_layout = "transposed" if layout != "transposed" else "col_sliced"
    return (place(x.to(dtype), layout, device), place(cos.to(dtype), table_layout, device),
            place(sin.to(dtype), "col_sliced", device), place(dy.to(dtype), "permuted", device))


def _check(fn, x, cos, sin, dy, offset, interleaved):
    xr = x.detach().clone().requires_grad_()
    y = fn(xr, cos, sin, offset, interleaved)
    (dx,) = torch.autograd.grad(y, (xr,), dy)
    assert_close("rope", (x, cos, sin, offset, interleaved), dy, forward=y, dx=dx)


@pytest.mark.parametrize("shape, dtype, layout, offset, interleaved", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(shape, dtype, layout, offset, interleaved, device):
    x, cos, sin, dy = _inputs(shape, dtype, layout, offset, device, seed=sum(shape))
    _check(k.rope, x, cos, sin, dy, offset, interleaved)


def test_partial_tiles_on_both_grid_axes(device, monkeypatch):
    """Bug class: a grid with floor division or a mask on one axis only; [4, 8] tiles give
    35 rows and R = 17 pairs partial tiles along both axes."""
    monkeypatch.setattr(k, "MAX_BLOCK", 8)
    monkeypatch.setattr(k, "TILE", 32)
    x, cos, sin, dy = _inputs((1, 7, 5, 34), torch.float32, "permuted", 3, device, seed=4)
    _check(k.rope, x, cos, sin, dy, 3, 0)
    _check(k.rope, x, cos, sin, dy, 3, 1)


# each twin runs the real kernel with one realistic slip in how it is called
TWINS = {
    "offset ignored": lambda x, c, s, o, i: k.rope(x, c, s, 0, i),
    "conventions swapped": lambda x, c, s, o, i: k.rope(x, c, s, o, 1 - i),
    "sine sign flipped": lambda x, c, s, o, i: k.rope(x, c, -s, o, i),
}


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_wrong_twins_fail(twin, device):
    x, cos, sin, dy = _inputs((1, 6, 2, 34), torch.float32, "contiguous", 5, device, seed=8)
    with pytest.raises(AssertionError, match=r"^rope (forward|dx): Mismatched"):
        _check(TWINS[twin], x, cos, sin, dy, 5, 1)


def test_harness_suite_passes_a_decode_case_of_each_convention():
    """The op's own checks (inputs unchanged, repeatable, refilled calls) on the kernel, in-process."""
    for inter in (0, 1):
        case = f"rope:B=1,S=3,H=5,D=34,P=43,R=17,dtype=float32,layout=mixed,values=normal,offset=37,interleaved={inter},seed=7"
        assert_kernel("rope", k.rope, case=case, backend="interpreter")


def test_harness_suite_fails_the_offset_ignoring_twin():
    case = "rope:B=1,S=3,H=5,D=34,P=43,R=17,dtype=float32,layout=mixed,values=normal,offset=37,interleaved=0,seed=7"
    with pytest.raises(AssertionError, match="forward"):
        assert_kernel("rope", TWINS["offset ignored"], case=case, backend="interpreter")


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(2, 3, 4, device=d), torch.ones(3, 2, device=d), torch.ones(3, 2, device=d), 0, 0), ValueError, "4-D"),
        (lambda d: (torch.ones(1, 3, 2, 5, device=d), torch.ones(3, 2, device=d), torch.ones(3, 2, device=d), 0, 0), ValueError, "even"),
        (lambda d: (torch.ones(1, 3, 2, 4, device=d), torch.ones(3, 3, device=d), torch.ones(3, 2, device=d), 0, 0), ValueError, "[P, D/2]"),
        (lambda d: (torch.ones(1, 3, 2, 4, device=d), torch.ones(4, 2, device=d), torch.ones(4, 2, device=d), 2, 0), ValueError, "at least 5 rows"),
        (lambda d: (torch.ones(1, 3, 2, 4, device=d), torch.ones(4, 2, device=d), torch.ones(4, 2, device=d), -1, 0), ValueError, "offset"),
        (lambda d: (torch.ones(1, 3, 2, 4, device=d, dtype=torch.float64), torch.ones(3, 2, device=d), torch.ones(3, 2, device=d), 0, 0), TypeError, "float64"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, device, monkeypatch):
    assert_rejected(k.rope, make(device), error, words, module=k, monkeypatch=monkeypatch, no_launch=("_rope_rotate",))


def test_bench_implementations_agree_and_count_bytes():
    """bench/rope.py: the LLM shape's bytes, and the columns compute one function (a column wired
    with another convention or signature would time something else)."""
    from bench import rope as bench

    ws = {w.name: w for w in bench.workloads()}
    assert ws["8x4096x32x128 bf16"].bytes["forward"] == (2 * 8 * 4096 * 32 * 128 + 4096 * 128) * 2
    inputs = next(w for w in ws.values() if w.quick).make("cpu")
    impls = bench.implementations()
    want = impls["torch rotate-half"](*inputs.args)
    torch.testing.assert_close(impls["triton_rope (project)"](*inputs.args), want)
