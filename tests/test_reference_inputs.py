"""Inputs as models have them, declared through ``harness.from_reference``: an input that gets no
gradient (a target distribution), an input with its own value kinds (probability rows), an
index input whose entries may be ``ignore_index``, and a scalar option whose values are cases of
their own (reduction='none' | 'mean' | 'sum'). Two ops declared by one call each
(examples/plugins/tvd_loss.py, examples/plugins/flce_rows.py).

Bug classes: a TVD whose gradient takes sign(0) as -1 where p == q (Liger-Kernel's
``where(p > q, 0.5, -0.5)``): only inputs that tie, probability rows sharing zeros, show it; a
fused linear cross-entropy whose reduction='none' gradients are all scaled by the first upstream
element: only a per-row upstream gradient shows it, and only the 'none' cases have one; a loss
that counts the rows whose label is ignore_index.
"""

from __future__ import annotations

import pytest
import torch

import harness
from harness.errors import RegistryError
from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.runner import run_case
from harness.ops.row_kinds import PROBABILITIES

TVD = "examples/plugins/tvd_loss.py"
FLCE = "examples/plugins/flce_rows.py"


def _plugin(path: str, name: str):
    from harness.registry import loader

    if name not in REGISTRY.ops:
        loader.load_all(plugins=[path])
    return REGISTRY.op(name)


def _failed(op, fn, cases) -> dict[str, set[str]]:
    """Per case id, the checks that failed (cases that passed every check left out)."""
    entry = KernelEntry(op.name, fn.__name__, fn, Contract(), "kernel", "plugin", __file__)
    out = {}
    for c in cases:
        bad = {r.check for r in run_case(op, entry, c, backend="interpreter", device="cpu").records if not r.passed}
        if bad:
            out[c.id] = bad
    return out


def _cases(op, kinds, dtype=torch.float32, layout="contiguous", ignored="some", sizes=None):
    """One case per value kind and option value, at the example's shape (a few ms each)."""
    (option,) = [s for s in op.scalars if len(s.values) > 1]
    fixed = {s.name: s.values[0] for s in op.scalars if s is not option}
    return [op.case(dict(op.example, **(sizes or {})), dtype, layout, kind, dict(fixed, **{option.name: v}), ignored)
            for kind in kinds for v in option.values]


# --- the TVD loss ----------------------------------------------------------------------------

def test_tvd_declares_q_without_gradient_probability_rows_labels_and_each_reduction():
    op = _plugin(TVD, "tvd_loss")
    assert op.grad_checks == ("dp",)  # q is a target: no_grad
    assert op.decl.value_kinds == PROBABILITIES
    floor = op.floor_cases(backend="interpreter")
    for dtype in op.dtype_names():  # every reduction is a case of its own in every dtype
        assert {c["reduction"] for c in floor if c["dtype"] == dtype} == {"batchmean", "sum", "mean", "none"}
    case = next(c for c in floor if c["values"] == "sparse_probs" and c["ignored"] == "some" and c["N"] > 2)
    assert "reduction=" in case.id and "ignored=some" in case.id
    p, q, labels, ignore_index, reduction = op.make_inputs(case, "cpu").args
    # rows drawn in fp32 and normalised there: their sums are 1 within fp32 rounding of a short sum
    assert torch.allclose(p.double().sum(-1), torch.ones(p.shape[0], dtype=torch.float64), atol=1e-5)
    assert ((p == 0) & (q == 0)).any()  # ties at the zeros of both rows
    assert (labels == ignore_index).any() and (labels != ignore_index).any()
    assert [n for _, n in op.output_dims(op.example, {"reduction": "none"})] == [op.example["N"], op.example["V"]]
    assert op.output_dims(op.example, {"reduction": "sum"}) == []


def test_tvd_sign_of_zero_as_liger_takes_it_fails_where_p_and_q_tie():
    op = _plugin(TVD, "tvd_loss")
    right, liger = (REGISTRY.entries[("tvd_loss", k)].fn for k in ("tvd_torch", "tvd_sign_as_liger"))
    cases = _cases(op, PROBABILITIES) + _cases(op, ("one_hot",), dtype=torch.bfloat16, layout="transposed")
    assert _failed(op, right, cases) == {}
    bad = _failed(op, liger, cases)
    tie_kinds = {c.id for c in cases if c["values"] != "probs"}  # probs rows: every entry positive, no tie
    assert set(bad) == tie_kinds and all(checks == {"dp"} for checks in bad.values()), bad


def test_tvd_that_counts_ignored_rows_fails():
    op = _plugin(TVD, "tvd_loss")
    right = REGISTRY.entries[("tvd_loss", "tvd_torch")].fn

    def counts_ignored(p, q, labels, ignore_index, reduction):  # the labels never read
        return right(p, q, torch.zeros_like(labels), ignore_index, reduction)

    cases = _cases(op, ("probs",))
    bad = _failed(op, counts_ignored, cases)
    assert set(bad) == {c.id for c in cases}, bad  # every reduction: rows that must add nothing add their loss


# --- fused linear cross-entropy, reduction none / mean / sum -----------------------------------

def test_flce_first_upstream_element_fails_reduction_none_only():
    op = _plugin(FLCE, "flce_rows")
    assert op.grad_checks == ("dx", "dweight")  # the target is an index: no gradient
    right, first = (REGISTRY.entries[("flce_rows", k)].fn for k in ("flce_torch", "flce_first_upstream"))
    cases = _cases(op, ("normal",)) + _cases(op, ("normal",), dtype=torch.bfloat16, ignored="none")
    assert _failed(op, right, cases) == {}
    bad = _failed(op, first, cases)
    none = {c.id for c in cases if c["reduction"] == "none"}
    assert set(bad) == none and all(checks == {"dx", "dweight"} for checks in bad.values()), bad
    assert all(op.make_inputs(c, "cpu").upstream.dim() == 1 for c in cases if c.id in none)  # one value per row


# the floor cases where a sum over classes cancels in the gradients: dx = sum_k dlogit_k W_k of two
# classes' weights near 1e4 (huge), or exactly equal in bf16 (expected 2.8e-17, an fp32 kernel
# -1.4e-11); the terms fp32 rounds are those the forward's and backward's steps cancel
CANCELLING_GRADIENTS = (
    "flce_rows:N=7,D=4097,V=7,dtype=float32,layout=col_sliced,values=huge,ignore_index=-100,reduction=none,"
    "ignored=some,seed=173815",
    "flce_rows:N=8,D=4093,V=8,dtype=bfloat16,layout=mixed,values=normal,ignore_index=-100,reduction=none,"
    "ignored=none,seed=788772",
    "flce_rows:N=7,D=4097,V=7,dtype=bfloat16,layout=contiguous,values=normal,ignore_index=-100,reduction=none,"
    "ignored=some,seed=484175",
    "flce_rows:N=255,D=16,V=32,dtype=float32,layout=contiguous,values=nonfinite,ignore_index=-100,reduction=none,"
    "ignored=some,seed=950225",
    "flce_rows:N=8,D=4093,V=8,dtype=float32,layout=transposed,values=normal,ignore_index=-100,reduction=mean,"
    "ignored=none,seed=298780",
    "flce_rows:N=255,D=16,V=32,dtype=float32,layout=contiguous,values=huge,ignore_index=-100,reduction=mean,"
    "ignored=none,seed=47387",
)


def test_flce_gradients_where_the_sum_over_classes_cancels_are_bounded_by_its_terms():
    """The fp32 kernel passes where its gradients' sum over classes cancels (its error there is
    up to 2.6e4 roundings of the result, a few of the terms); the one scaling every row by the
    first upstream element still fails the 'none' ones."""
    from harness.cases.case import Case

    op = _plugin(FLCE, "flce_rows")
    right, first = (REGISTRY.entries[("flce_rows", k)].fn for k in ("flce_torch", "flce_first_upstream"))
    cases = [Case.parse(i) for i in CANCELLING_GRADIENTS]
    assert _failed(op, right, cases) == {}
    none = {c.id for c in cases if c["reduction"] == "none"}
    assert set(_failed(op, first, cases)) == none


# --- declaration errors ----------------------------------------------------------------------

EXAMPLE = (torch.randn(4, 8), torch.randn(4, 8), torch.tensor([1, -100, 7, 3]), -100, "sum")


def _declare(**kw):
    def loss(p, q, labels, ignore_index, reduction):
        keep = (labels != ignore_index).unsqueeze(-1).to(p.dtype)
        out = (p - q).square() * keep
        return {"none": out, "sum": out.sum()}[reduction]

    return harness.from_reference(loss, EXAMPLE, vary={"p": ("N", "V"), "q": ("N", "V"), "labels": ("N",)},
                                  name="ref_inputs_loss", register=False, **kw)


@pytest.mark.parametrize("kw, says", [
    (dict(no_grad=("labels",)), "no_grad names ['labels'], which are no float tensor inputs"),
    (dict(input_kinds={"p": ("probs", "wobbly")}), "input_kinds['p']"),
    (dict(ignore_index="reduction"), "an int parameter of the reference"),
    (dict(options={"q": (1, 2)}), "options names 'q'"),
    (dict(options={"reduction": ("none", 1.5)}), "Scalar 'reduction'"),
    (dict(options={"reduction": ("none", "bogus")}, ignore_index="ignore_index"), "sizes, reduction='bogus': KeyError"),
])
def test_a_bad_role_is_one_line_naming_it(kw, says):
    with pytest.raises(RegistryError) as err:
        _declare(**kw)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_without_the_new_parameters_the_declaration_is_as_before():
    """Labels holding -100 without ignore_index: the example's ignored value is still refused, as
    before (a negative index is bounded by no dim); with it, the labels' bound is the class dim."""
    with pytest.raises(RegistryError, match="bounded by no dim"):
        _declare()
    op = _declare(ignore_index="ignore_index", options={"reduction": ("none", "sum")})
    assert op.decl.inputs[2].high == "V" and op.decl.inputs[2].ignore == "ignore_index"
    assert op.grad_checks == ("dp", "dq") and "reduction in ('none', 'sum')" in op.decl.signature


# --- several outputs -------------------------------------------------------------------------

def _softmax_and_lse(x, w):
    z = x * w
    return torch.softmax(z, -1), torch.logsumexp(z, -1)


def test_a_tuple_returning_reference_checks_each_output_and_each_gradient_path():
    """Bug classes: a second output off in the third digit; a backward that drops the second
    output's upstream gradient (right for a caller that only uses the first)."""
    op = harness.from_reference(_softmax_and_lse, (torch.randn(8, 40), torch.randn(40)),
                                vary={"x": ("M", "N"), "w": ("N",)}, name="ref_two_outputs", register=False)
    assert op.decl.signature == "f(x[M, N], w[N]) -> (out0[M, N], out1[M])"
    assert op.output_checks == ("forward", "forward_out1") and op.grad_checks == ("dx", "dw")
    cases = [op.case(dict(op.example, **s), torch.float32, "contiguous", "normal", {}, None) for s in ({}, {"M": 3, "N": 17})]
    up = op.make_inputs(cases[0], "cpu").upstream
    assert [tuple(u.shape) for u in up] == [(8, 40), (8,)]  # one upstream gradient per output

    def right(x, w):
        z = x.float() * w.float()
        return torch.softmax(z, -1).to(x.dtype), torch.logsumexp(z, -1).to(x.dtype)

    def second_off(x, w):
        y, lse = right(x, w)
        return y, lse.detach() * (1 + 1e-3) + (lse - lse.detach())

    class FirstPathOnly(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return right(x, w)

        @staticmethod
        def backward(ctx, dy, dlse):  # dlse never used
            x, w = ctx.saved_tensors
            with torch.enable_grad():
                xf, wf = x.float().requires_grad_(), w.float().requires_grad_()
                gx, gw = torch.autograd.grad(torch.softmax(xf * wf, -1), (xf, wf), dy.float())
            return gx.to(x.dtype), gw.to(w.dtype)

    def first_path_only(x, w):
        return FirstPathOnly.apply(x, w)

    assert _failed(op, right, cases) == {}
    assert all(checks == {"forward_out1"} for checks in _failed(op, second_off, cases).values())
    assert len(_failed(op, second_off, cases)) == len(cases)
    assert all(checks == {"dx", "dw"} for checks in _failed(op, first_path_only, cases).values())
    assert len(_failed(op, first_path_only, cases)) == len(cases)
