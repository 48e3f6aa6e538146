"""Leading (batch) dims of row-wise ops (OpDecl(leading=...), harness.ops.leading): cases x[*lead, N]
with irregular, sliced and transposed leading dims; a kernel that flattens them right passes, one
that assumes one row stride fails; a 2-D kernel declaring max_leading_dims=1 is not failed there."""

import torch

from harness import Contract
from harness.registry.registry import REGISTRY, load_builtin_ops
from harness.run.runner import run_case
from harness.testing import entry_for
from harness.ops import leading

OPS = ("softmax", "swiglu", "layer_norm")


def spec(op):
    load_builtin_ops()
    return REGISTRY.op(op)


def lead_cases(op):
    return [c for c in spec(op).floor_cases(backend="interpreter") if c.get(leading.LEAD)]


def run(op, fn, cases, contract=None):
    entry = entry_for(op, fn, contract=contract)
    return [r for c in cases for r in run_case(spec(op), entry, c, backend="interpreter", device="cpu").records]


def test_leading_cases_follow_the_floor_and_cover_what_callers_pass():
    for op in OPS:
        floor = spec(op).floor_cases(backend="interpreter")
        ids = [c.id for c in floor]
        # every leading case, mixed and mixed_alt where the op has that layout
        n = sum(1 for _, _, layout, _ in leading.CASES if layout not in ("mixed", "mixed_alt") or layout in spec(op).layouts)
        assert n >= len(leading.CASES) - 2
        assert all(c.get(leading.LEAD) for c in floor[-n:]) and not any(c.get(leading.LEAD) for c in floor[:-n])
        assert len(set(ids)) == len(ids)
    cases = lead_cases("softmax")
    shapes = {c[leading.LEAD] for c in cases}
    assert {"3x17", "1x17", "17x1", "2x3x5", "2x3x1x4"} <= shapes  # irregular B and S, B = 1, S = 1, 3 and 4 dims
    assert {leading.SEQ_SLICED, leading.LEAD_TRANSPOSED, "permuted"} <= {c["layout"] for c in cases}
    s = spec("softmax")
    x = s.make_inputs(next(c for c in cases if c["layout"] == leading.SEQ_SLICED), "cpu").args[0]
    assert x.dim() == 3 and x.stride(0) != x.shape[1] * x.stride(1)  # x[:, :S] of a longer sequence
    x = s.make_inputs(next(c for c in cases if c["layout"] == leading.LEAD_TRANSPOSED), "cpu").args[0]
    assert x.stride(0) < x.stride(1)  # a seq-first tensor seen batch-first
    for c in cases:
        s.validate_case(c)


def softmax_rows(x):
    """A wrapper that flattens the leading dims correctly (reshape: a copy where no view exists)."""
    return torch.softmax(x.reshape(-1, x.shape[-1]).float(), -1).to(x.dtype).reshape(x.shape)


def softmax_one_row_stride(x):
    """The wrong twin: rows assumed evenly spaced by the last leading dim's stride (as a kernel
    launched with x.stride(-2) as its only row stride reads them)."""
    rows = x.as_strided((x.numel() // x.shape[-1], x.shape[-1]), (x.stride(-2), x.stride(-1)))
    return torch.softmax(rows.float(), -1).to(x.dtype).reshape(x.shape)


def softmax_2d_only(x):
    if x.dim() != 2:
        raise ValueError("x must be 2-D")
    return torch.softmax(x.float(), -1).to(x.dtype)


def test_a_kernel_flattening_leading_dims_right_passes_and_its_wrong_twin_fails():
    cases = [c for c in lead_cases("softmax") if c["layout"] in (leading.SEQ_SLICED, leading.LEAD_TRANSPOSED)][:3]
    assert all(r.passed for r in run("softmax", softmax_rows, cases))
    failed = {r.case_id for r in run("softmax", softmax_one_row_stride, cases) if not r.passed}
    assert {c.id for c in cases if c["layout"] == leading.LEAD_TRANSPOSED} <= failed


def test_a_2d_kernel_declaring_its_limit_is_not_failed_on_leading_dims():
    cases = lead_cases("softmax")[:3]
    records = run("softmax", softmax_2d_only, cases, Contract(max_leading_dims=1))
    assert records and all(r.passed and r.check == "contract" for r in records)
    assert "max_leading_dims=1" in records[0].message
    undeclared = run("softmax", softmax_2d_only, cases[:1])
    assert not undeclared[0].passed and "raised ValueError" in undeclared[0].message


def softmax_2d_asserted(x):
    assert x.dim() == 2, "x must be 2-D"  # the limit stated as wrappers in the wild state it
    return torch.softmax(x.float(), -1).to(x.dtype)


def test_an_assert_rejecting_an_out_of_contract_case_counts_when_the_kernel_states_its_limits():
    """With Contract(self_limits=True) the kernel's assert is its rejection, out of contract too;
    without the declaration an AssertionError stays a wrong answer to an out-of-contract case."""
    cases = lead_cases("softmax")[:2]
    records = run("softmax", softmax_2d_asserted, cases, Contract(max_leading_dims=1, self_limits=True))
    assert records and all(r.passed and r.check == "contract" for r in records)
    assert "with AssertionError" in records[0].message
    plain = run("softmax", softmax_2d_asserted, cases[:1], Contract(max_leading_dims=1))
    assert not plain[0].passed and "raised AssertionError" in plain[0].message
    assert "expected ValueError, TypeError or NotImplementedError" in plain[0].message


def test_the_project_kernels_take_leading_dims():
    from harness.registry.registry import load_project_kernels

    load_project_kernels()
    case = next(c for c in lead_cases("swiglu") if c["layout"] == leading.LEAD_TRANSPOSED)
    for op in ("softmax", "swiglu"):
        entry = REGISTRY.get(op, f"triton_{op}")
        same = (leading.LEAD, "layout", "dtype")  # the seed and value kind are each op's own
        c = next(c for c in lead_cases(op) if all(c.get(k) == case.get(k) for k in same))
        records = run_case(spec(op), entry, c, backend="interpreter", device="cpu").records
        assert all(r.passed for r in records), [r.message for r in records if not r.passed]
