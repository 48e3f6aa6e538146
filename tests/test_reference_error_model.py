"""The error model of an op declared from a torch reference (properties.reference): the identity
candidate (the reference itself, run in the case's dtype) passes, and a candidate off by more
than the model explains fails. Each rule is a class of formula, shown on a small synthetic op."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import harness
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case


def _failed(op, fn, cases) -> dict[str, list[str]]:
    """Per case id, the checks that failed."""
    entry = KernelEntry(op.name, fn.__name__, fn, Contract(), "kernel", "plugin", __file__)
    out = {}
    for c in cases:
        bad = [r.check for r in run_case(op, entry, c, backend="interpreter", device="cpu").records if not r.passed]
        if bad:
            out[c.id] = bad
    return out


def _cases(op, values: str | None = None, limit: int = 6, holding=None) -> list:
    """The op's floor cases of value kind ``values`` whose inputs hold ``holding`` (a float) somewhere."""
    cases = [c for c in op.floor_cases(backend="interpreter") if values is None or c["values"] == values]
    if holding is not None:
        cases = [c for c in cases if any(bool((a == holding).any()) for a in op.make_inputs(c, "cpu").args)]
    assert cases, values
    return cases[:limit]


# --- a NaN where the reference in the case's dtype gives NaN --------------------------------

def test_nan_is_accepted_where_the_reference_in_its_dtype_gives_nan_and_nowhere_else():
    """torch's fp32 gelu(+inf) is NaN, its float64 one +inf: the identity candidate passes on rows
    holding +inf; a NaN where the fp32 reference is finite, or where it is inf (softplus(+inf)),
    fails."""
    gelu = harness.from_reference(torch.nn.GELU(), (torch.randn(4, 32),), vary="auto", name="ref_gelu_inf",
                                  differentiable=False, dtypes=(torch.float32,), register=False)
    cases = _cases(gelu, "nonfinite", holding=float("inf"))
    assert bool(torch.isnan(F.gelu(torch.full((32,), float("inf")))).all()), "torch's fp32 gelu(+inf) is no longer NaN"

    def identity(x):
        return F.gelu(x)

    def nan_where_finite(x):  # NaN also at the first finite element of each row
        y = F.gelu(x).clone()
        first = torch.isfinite(x).float().argmax(-1, keepdim=True)
        return y.scatter(-1, first, float("nan"))

    assert _failed(gelu, identity, cases) == {}
    assert set(_failed(gelu, nan_where_finite, cases)) == {c.id for c in cases}

    softplus = harness.from_reference(torch.nn.Softplus(), (torch.randn(4, 32),), vary="auto", name="ref_softplus_inf",
                                      differentiable=False, dtypes=(torch.float32,), register=False)
    cases = _cases(softplus, "nonfinite", holding=float("inf"))

    def softplus_identity(x):
        return F.softplus(x)

    def nan_at_inf(x):  # NaN where the reference in fp32 gives +inf
        return torch.where(torch.isinf(x), float("nan"), F.softplus(x))

    assert _failed(softplus, softplus_identity, cases) == {}
    assert set(_failed(softplus, nan_at_inf, cases)) == {c.id for c in cases}
