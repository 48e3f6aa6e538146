"""kernels.fused_linear_ce_hybrid: cuBLAS matmuls + a Triton softmax writing G over its own
logits. Bug classes: the in-place G clobbering logits not yet read (several chunks, 16-bit
dtypes), a row softmax that only works on one vocabulary tile, the low-precision dW path,
an upstream gradient ignored or applied twice, a backward that is not repeatable."""

import pytest
import torch

from harness.cases.case import Case
from harness.registry.registry import REGISTRY
from harness.run.runner import run_case
from kernels import fused_linear_ce_hybrid as h

OP = "fused_linear_cross_entropy"
SPEC = REGISTRY.op(OP)
ENTRY = REGISTRY.get(OP, "triton_flce_hybrid")
FLOOR = SPEC.floor_cases(backend="interpreter")


def _case(n, d, v, dtype="float32", values="normal", ignored="some", seed=1):
    return Case.of(OP, N=n, D=d, V=v, dtype=dtype, layout="contiguous", values=values, ignored=ignored,
                   ignore_index=-100, seed=seed)


def _failures(run):
    return [(r.check, r.message) for r in run.records if not r.passed]


@pytest.mark.parametrize("case", FLOOR[::4], ids=lambda c: c.id)
def test_hybrid_passes_floor_cases(case, device, backend):
    run = run_case(SPEC, ENTRY, case, backend=backend.name, device=device)
    assert run.passed, _failures(run)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_several_chunks_with_g_written_over_the_logits(dtype, device, backend, monkeypatch):
    monkeypatch.setattr(h, "LOGITS_BUFFER_BYTES", 4 * 70 * 7)  # 7 rows per chunk at V = 70: five chunks
    monkeypatch.setattr(h, "BLOCK_V", 32)  # three vocabulary tiles per row
    assert h._chunk_rows(33, 70) == 7
    run = run_case(SPEC, ENTRY, _case(33, 20, 70, dtype=dtype, values="ascending"), backend=backend.name, device=device)
    assert run.passed, _failures(run)


def test_dw_accumulated_in_the_weight_dtype(device, backend, monkeypatch):
    monkeypatch.setattr(h, "FP32_DW_BYTES", 0)
    monkeypatch.setattr(h, "LOGITS_BUFFER_BYTES", 4 * 70 * 9)
    run = run_case(SPEC, ENTRY, _case(40, 16, 70, dtype="bfloat16"), backend=backend.name, device=device)
    assert run.passed, _failures(run)


def test_upstream_is_applied_once_and_a_second_backward_gives_the_same_gradients(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, generator=g).to(device).requires_grad_()
    w = torch.randn(11, 8, generator=g).to(device).requires_grad_()
    t = torch.tensor([0, 10, -100, 3, 3, 7], device=device)
    loss = h.fused_linear_cross_entropy_hybrid(x, w, t)
    up = torch.tensor(-3.0, device=device)
    first = torch.autograd.grad(loss, (x, w), up, retain_graph=True)
    second = torch.autograd.grad(loss, (x, w), up, retain_graph=True)
    ones = torch.autograd.grad(loss, (x, w))
    ref = torch.nn.functional.cross_entropy(x.double() @ w.double().T, t)
    expected = torch.autograd.grad(ref, (x, w))
    # fp32 inputs against a float64 reference: the worst error measured here is 1.2e-7 (one fp32 ulp
    # near 1), so 1e-6 + 1e-5 * |expected| leaves an 8x margin, while a gradient scaled by the wrong
    # upstream (1 instead of -3, or applied twice) is off by 100% or more
    for a, b, one, e in zip(first, second, ones, expected):
        assert torch.equal(a, b)
        torch.testing.assert_close(one.double(), e.double(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a.double(), -3.0 * e.double(), rtol=1e-5, atol=1e-6)


def test_all_ignored_gives_nan_loss_and_zero_gradients(device):
    x = torch.randn(3, 4, device=device, requires_grad=True)
    w = torch.randn(5, 4, device=device, requires_grad=True)
    t = torch.full((3,), -100, device=device)
    loss = h.fused_linear_cross_entropy_hybrid(x, w, t)
    dx, dw = torch.autograd.grad(loss, (x, w))
    assert torch.isnan(loss) and not dx.any() and not dw.any()


def test_no_gradient_work_under_no_grad(device, monkeypatch):
    # an evaluation loss under torch.no_grad() must not compute (and hold) dx and dW
    seen = []
    original = h._forward
    monkeypatch.setattr(h, "_forward", lambda *a: seen.append(a[4:6]) or original(*a))
    x = torch.randn(4, 8, device=device, requires_grad=True)
    w = torch.randn(9, 8, device=device, requires_grad=True)
    t = torch.randint(0, 9, (4,), device=device)
    with torch.no_grad():
        no_grad_loss = h.fused_linear_cross_entropy_hybrid(x, w, t)
    loss = h.fused_linear_cross_entropy_hybrid(x, w, t)
    assert seen == [(False, False), (True, True)]
    assert torch.equal(no_grad_loss, loss.detach())


# bug class: a gradient computed for an upstream of 1, rounded to fp16, then scaled by the upstream
# (Liger-Kernel's pattern, and this kernel's) is off by u (|g| + tiny) |upstream|; below fp16's
# smallest normal the model counted u |g| only, and the kernel failed dweight at 1.22x (values=tiny)
def test_a_gradient_rounded_before_the_upstream_scales_it_passes_where_it_is_subnormal(device, backend):
    from oracles.fused_linear_ce import fused_linear_ce_rounded_gradients

    case = Case.parse("fused_linear_cross_entropy:N=64,D=64,V=256,dtype=float16,layout=offset,values=tiny,"
                      "ignore_index=-100,ignored=some,seed=477378")
    run = run_case(SPEC, ENTRY, case, backend=backend.name, device=device)
    assert any(r.check == "dweight" for r in run.records)
    assert run.passed, _failures(run)
    x, w = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    loss, dx, dw = fused_linear_ce_rounded_gradients(x, w, torch.tensor(-7.0), tiny=1e-4)
    assert loss is None and dx.shape == x.shape and dw.shape == w.shape
    assert torch.all(dx == 7e-4) and torch.all(dw == 7e-4)  # the floor, scaled by |upstream|
    assert not fused_linear_ce_rounded_gradients(x, w, 7.0)[2].any()  # nothing without a floor
