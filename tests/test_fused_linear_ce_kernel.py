"""kernels.fused_linear_ce: the project's kernel passes floor cases, names the all-ignored
difference, rejects out-of-contract inputs cleanly, keeps its memory bounded, and every
catalog mutant is killed by one small case (the dW race excepted: only a GPU shows it)."""

import pytest
import torch

from kernel_checks import assert_rejected
import properties.mutants.fused_linear_cross_entropy as catalog
from harness.cases.case import Case
from harness.registry.registry import REGISTRY
from harness.run.runner import run_case
from kernels import fused_linear_ce as k

OP = "fused_linear_cross_entropy"
SPEC = REGISTRY.op(OP)
ENTRY = REGISTRY.get(OP, "triton_flce")
FLOOR = SPEC.floor_cases(backend="interpreter")


def _case(n, d, v, dtype="float32", layout="contiguous", values="normal", ignored="some", ignore_index=-100, seed=1):
    return Case.of(
        OP, N=n, D=d, V=v, dtype=dtype, layout=layout, values=values, ignored=ignored, ignore_index=ignore_index, seed=seed
    )


def _failures(run):
    return [(r.check, r.message) for r in run.records if not r.passed]


@pytest.mark.parametrize("case", FLOOR[1::3], ids=lambda c: c.id)
def test_project_kernel_passes_floor_cases(case, device, backend):
    run = run_case(SPEC, ENTRY, case, backend=backend.name, device=device)
    assert run.passed, _failures(run)


def test_all_ignored_batch_is_its_own_check_and_matches_torch_nan(device, backend):
    """Bug class: a kernel returning 0 (Liger's choice) where torch gives NaN."""
    case = _case(17, 33, 63, ignored="all")
    run = run_case(SPEC, ENTRY, case, backend=backend.name, device=device)
    checks = {r.check for r in run.records}
    assert run.passed and "all_ignored" in checks and "loss" not in checks, _failures(run)
    zero = run_case(SPEC, REGISTRY.get(OP, "cat.all_ignored_returns_zero"), case, backend=backend.name, device=device)
    assert [c for c, _ in _failures(zero)] == ["all_ignored"]


def test_dw_accumulated_in_the_weight_dtype_across_chunks(device, backend, monkeypatch):
    """The large-shape path (dW rounded to bf16 once per chunk) on a three-chunk case."""
    monkeypatch.setattr(k, "FP32_DW_BYTES", 0)
    run = run_case(SPEC, ENTRY, _case(40, 16, 70, dtype="bfloat16"), backend=backend.name, device=device)
    assert run.passed, _failures(run)


def test_backward_honours_upstream_and_counts_calls(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g).to(device).requires_grad_()
    w = torch.randn(11, 8, generator=g).to(device).requires_grad_()
    t = torch.tensor([0, 10, -100, 3, 3], device=device)
    before = dict(k.CALLS)
    loss = k.fused_linear_cross_entropy(x, w, t)
    dx, dw = torch.autograd.grad(loss, (x, w), torch.tensor(-3.0, device=device))
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = torch.nn.functional.cross_entropy(xr @ wr.T, t)
    dxr, dwr = torch.autograd.grad(ref, (xr, wr), torch.tensor(-3.0, dtype=torch.float64))
    torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dx.double(), dxr, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(dw.double(), dwr, rtol=1e-4, atol=1e-6)
    assert k.CALLS == {"forward": before["forward"] + 1, "backward": before["backward"] + 1}


def test_memory_stays_bounded_at_the_benchmark_shape():
    """N=16384, D=4096, V=128256 bf16: G [chunk, V] within G_BUFFER_BYTES, dW accumulated in bf16,
    so the extra memory is dW + dx + G, about Liger-Kernel's 1.32 GB."""
    n, d, v = 16384, 4096, 128256
    chunk = k._chunk_rows(n, v, d, 2)
    g_bytes = chunk * v * 2
    assert chunk == 512 and g_bytes <= k.G_BUFFER_BYTES
    assert v * d * 4 > k.FP32_DW_BYTES  # dW accumulates in bf16 there: no 2.1 GB fp32 buffer
    extra = v * d * 2 + n * d * 2 + g_bytes + 4 * n * 8
    assert extra <= 1.33e9
    assert k._chunk_rows(10**7, v, d, 2) == chunk  # bounded whatever N is


def _t(device, values):
    return torch.tensor(values, dtype=torch.int64, device=device)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(2, 3, 4, device=d), torch.ones(5, 4, device=d), _t(d, [0, 1])), ValueError, "x must be 2-D"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 3, device=d), _t(d, [0, 1])), ValueError, "weight must be [V, 4]"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 4, device=d), _t(d, [0, 1, 2])), ValueError, "target must have shape (2,)"),
        (lambda d: (torch.ones(2, 4, device=d).double(), torch.ones(5, 4, device=d).double(), _t(d, [0, 1])), TypeError, "float64"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 4, device=d).half(), _t(d, [0, 1])), TypeError, "cast weight"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 4, device=d), _t(d, [0, 1]).int()), TypeError, "target.long()"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 4, device=d), _t(d, [0, 5])), ValueError, "target[1] = 5"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, 4, device=d), _t(d, [-3, 1])), ValueError, "target[0] = -3"),
        (lambda d: (torch.ones(0, 4, device=d), torch.ones(5, 4, device=d), _t(d, [])), ValueError, "N = 0"),
        (lambda d: (torch.ones(1, 65537, device=d), torch.ones(2, 65537, device=d), _t(d, [0])), ValueError, "D = 65537"),
    ],
)
def test_contract_errors_name_constraint_value_and_fix(make, error, words, device):
    assert_rejected(k.fused_linear_cross_entropy, make(device), error, words)


def test_ignore_index_must_be_an_int(device):
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        k.fused_linear_cross_entropy(torch.ones(2, 4, device=device), torch.ones(5, 4, device=device), _t(device, [0, 1]), 1.5)


# One small case per catalog mutant, chosen to expose its bug class (see each entry's 'why').
KILLING_CASES = {
    "cat.no_max_subtraction": _case(1, 40, 129, values="large", ignored="none"),
    "cat.dw_chunk_overwritten": _case(17, 33, 63),
    "cat.running_sum_not_rescaled": _case(1, 8, 600, values="ascending", ignored="none"),  # 5 splits of 2 tiles
    "cat.split_merge_not_rescaled": _case(1, 40, 129, ignored="none"),
    "cat.vocab_mask_off_by_one": _case(3, 8, 65, ignored="none"),
    "cat.ignore_index_not_in_backward": _case(17, 33, 63),
    "cat.ignore_index_hardcoded": _case(17, 33, 63, ignore_index=0),
    "cat.mean_over_all_rows": _case(17, 33, 63),
    "cat.all_ignored_returns_zero": _case(5, 8, 9, ignored="all"),
    "cat.upstream_ignored": _case(4, 8, 9, ignored="none"),
    "cat.weight_assumed_contiguous_in_dx": _case(4, 8, 9, layout="transposed"),
    "cat.target_assumed_contiguous": _case(17, 8, 9, layout="transposed"),
}


# GPU-only entries (backends=["cuda"]): a case of the CUDA floor, which the interpreter never runs
GPU_KILLING_CASES = {
    "cat.row_offset_int32": next(c for c in SPEC.floor_cases(backend="cuda")
                                 if c["layout"] == "index_width_rows" and c.get("wide") == "x"),
}


def test_every_patch_in_the_catalog_has_a_killing_case():
    assert sorted(KILLING_CASES) == sorted(e["name"] for e in catalog.CATALOG if "backends" not in e)
    assert sorted(GPU_KILLING_CASES) == sorted(e["name"] for e in catalog.CATALOG if "backends" in e)
    assert len({e["bug_class"] for e in catalog.CATALOG}) >= 8


@pytest.mark.parametrize("name", sorted(KILLING_CASES))
def test_catalog_mutant_is_killed(name, device, backend):
    run = run_case(SPEC, REGISTRY.get(OP, name), KILLING_CASES[name], backend=backend.name, device=device)
    assert not run.passed, f"{name} survived {KILLING_CASES[name].id}"


@pytest.mark.parametrize("name", sorted(GPU_KILLING_CASES))
def test_gpu_only_catalog_mutant_is_killed_on_cuda(name, device, backend):
    if backend.is_interpreter:
        pytest.skip("an index-width case needs a GPU: its input's storage spans 2**31 elements")
    run = run_case(SPEC, REGISTRY.get(OP, name), GPU_KILLING_CASES[name], backend=backend.name, device=device)
    assert not run.passed, f"{name} survived {GPU_KILLING_CASES[name].id}"


def test_dw_race_is_invisible_to_the_interpreter(device, backend):
    """The tutorial's race: correct whenever programs run one after another, as in the interpreter;
    only a GPU run can kill it, so the interpreter campaign must not count it as covered."""
    if not backend.is_interpreter:
        pytest.skip("on a GPU the race is real and this mutant must fail instead")
    run = run_case(SPEC, REGISTRY.get(OP, "cat.dw_race_plain_rmw"), _case(40, 16, 70), backend=backend.name, device=device)
    assert run.passed, _failures(run)
