"""A bool mask input and an integer output, declared through ``harness.from_reference``: a
masked cumulative sum takes ``mask`` as a torch.bool tensor, drawn true at densities from none to
all; an argmax returns int64 indices, compared exactly (any index off fails, a float output of
the right values fails its dtype).

Bug classes: a kernel that inverts the mask (keeps what the reference drops); an argmax that
breaks ties towards the last index (torch's and numpy's take the first), right on every row
without a tie.
"""

from __future__ import annotations

import torch

from harness.compare.allclose import compare
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case
from harness.ops.reference import from_reference


def _failed(op, fn, cases) -> dict[str, dict[str, str]]:
    """Per failing case id, its failed checks and their messages."""
    entry = KernelEntry(op.name, fn.__name__, fn, Contract(), "kernel", "plugin", __file__)
    out = {}
    for c in cases:
        bad = {r.check: r.message for r in run_case(op, entry, c, backend="interpreter", device="cpu").records
               if not r.passed}
        if bad:
            out[c.id] = bad
    return out


def _some(op, kinds, count=14):
    """The floor's first cases of each value kind in ``kinds``, fp32 and bf16 (a few ms each)."""
    floor = op.floor_cases(backend="interpreter")
    out = []
    for kind in kinds:
        out += [c for c in floor if c["values"] == kind][:count]
    return out


# --- a bool mask input -----------------------------------------------------------------------

def _masked_cumsum(x, mask):
    return torch.cumsum(torch.where(mask, x, torch.zeros_like(x)), dim=-1)


def _mask_op():
    return from_reference(_masked_cumsum, (torch.randn(6, 40), torch.rand(6, 40) < 0.5),
                          vary={"x": ("M", "N"), "mask": ("M", "N")}, name="masked_cumsum_t", register=False)


def masked_cumsum(x, mask):
    return torch.cumsum(torch.where(mask, x.float(), 0.0), dim=-1).to(x.dtype)


def masked_cumsum_inverted(x, mask):
    return torch.cumsum(torch.where(~mask, x.float(), 0.0), dim=-1).to(x.dtype)


def test_a_bool_input_is_a_mask_drawn_at_every_density_and_gets_no_gradient():
    op = _mask_op()
    mask = next(i for i in op.decl.inputs if i.name == "mask")
    assert mask.values == "bool" and not mask.differentiable and op.grad_checks == ("dx",)
    densities = set()
    for c in op.floor_cases(backend="interpreter")[:40]:
        x, m = op.make_inputs(c, "cpu").args
        assert m.dtype == torch.bool and x.dtype == getattr(torch, c["dtype"].replace("bf16", "bfloat16")
                                                            .replace("fp16", "float16").replace("fp32", "float32"))
        densities.add(round(float(m.float().mean()), 1))
    assert {0.0, 1.0} <= densities and len(densities) >= 4  # none, all, and partial masks


def test_masked_cumsum_passes_and_the_inverted_mask_fails():
    op = _mask_op()
    cases = _some(op, ("normal", "mixed_scale"), count=6)
    assert _failed(op, masked_cumsum, cases) == {}
    bad = _failed(op, masked_cumsum_inverted, cases)
    assert len(bad) >= len(cases) - 2  # all but an all-true-and-all-false coincidence
    assert all("forward" in checks for checks in bad.values())


# --- an integer output -----------------------------------------------------------------------

def _argmax_op():
    return from_reference(lambda x: torch.argmax(x, dim=-1), (torch.randn(8, 33),), vary={"x": ("M", "N")},
                          name="argmax_t", register=False)


def argmax(x):
    return torch.argmax(x, dim=-1)


def argmax_last_on_ties(x):
    n = x.shape[-1]
    return (n - 1 - torch.argmax(torch.flip(x, dims=(-1,)), dim=-1)).to(torch.int64)


def argmax_as_float(x):
    return torch.argmax(x, dim=-1).to(x.dtype)


def test_an_integer_output_is_declared_with_its_dtype_forward_only_and_ties_among_the_kinds():
    op = _argmax_op()
    assert op.out_dtypes == (torch.int64,) and op.grad_checks == ()
    assert "ties" in op.decl.value_kinds
    case = op.floor_cases(backend="interpreter")[0]
    assert op.forward_meta(op.make_inputs(case, "cpu")).dtype == torch.int64


def test_argmax_passes_and_the_last_index_on_ties_fails_exactly_there():
    op = _argmax_op()
    ties, normal = _some(op, ("ties",), 6), _some(op, ("normal",), 6)
    assert _failed(op, argmax, ties + normal) == {}
    bad = _failed(op, argmax_last_on_ties, ties + normal)
    assert set(bad) == {c.id for c in ties if c["N"] > 1}  # right wherever no row ties (one column: none)
    assert len(bad) >= 4
    message = next(iter(bad.values()))["forward"]
    assert "compared exactly" in message and "got" in message


def test_argmax_returned_as_floats_fails_its_dtype():
    op = _argmax_op()
    bad = _failed(op, argmax_as_float, _some(op, ("normal",), 2))
    assert bad and all("output_meta" in checks for checks in bad.values())
    assert "dtype" in next(iter(bad.values()))["output_meta"]


def test_an_integer_comparison_allows_no_difference_whatever_the_tolerance():
    expected = torch.tensor([3, 0, 7])
    assert compare(torch.tensor([3, 0, 7]), expected, atol=1.0, rtol=1.0).passed
    off = compare(torch.tensor([3, 1, 7]), expected, atol=1.0, rtol=1.0)
    assert not off.passed and off.mismatched == 1 and off.worst_index == [1]
    assert "int64 output compared exactly" in off.message and "got 1, expected 0" in off.message
