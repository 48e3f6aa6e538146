"""add_rmsnorm, the fused residual add + RMSNorm with two outputs (y, h), and the engine's
support for ops of several outputs.

The project's Triton kernel passes a spread of floor cases; every catalog mutant is killed by
one small case; a correct kernel of the other style (y and the backward from the rounded h, in
plain torch) passes every check; wrong twins fail the check that names what they got wrong
(h not returned, h wrong, h in fp32, a backward whose 1/rms belongs to another h than the one
beside it); declarations of several outputs that cannot work are refused with a message that
says why. Single-output ops keep their checks."""

from __future__ import annotations

import pytest
import torch

import properties.mutants.add_rmsnorm as catalog
from harness.cases.case import Case
from harness.errors import RegistryError
from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.runner import run_case
from harness.ops.derive import DeclaredOp

OP = "add_rmsnorm"
SPEC = REGISTRY.op(OP)
MAX_ELEMENTS = 4096
MAX_CASES = 12


def _case(m, n, dtype="float32", layout="contiguous", values="normal", eps=1e-6, seed=1):
    return Case.of(OP, M=m, N=n, dtype=dtype, layout=layout, values=values, eps=eps, seed=seed)


def spread() -> list[Case]:
    """Small floor cases, each bringing a value kind, layout, dtype or eps the ones before did not."""
    seen, chosen = set(), []
    for c in SPEC.floor_cases(backend="interpreter"):
        if int(c["M"]) * int(c["N"]) > MAX_ELEMENTS:
            continue
        keys = {(k, str(v)) for k, v in dict(c.params).items() if k not in ("seed", "M", "N")}
        if keys - seen:
            seen |= keys
            chosen.append(c)
    return chosen[:MAX_CASES]


def failed(fn, cases, device="cpu", backend="interpreter") -> dict[str, str]:
    entry = KernelEntry(OP, fn.__name__, fn, Contract(), "kernel", "plugin", "tests/test_add_rmsnorm.py")
    bad = {}
    for c in cases:
        run = run_case(SPEC, entry, c, backend=backend, device=device)
        assert run.records
        bad.update({r.check: r.message for r in run.records if not r.passed})
    return bad


# --- kernels of the other style and wrong twins (plain torch, autograd backward) ------------------
def rounded_h_style(x, residual, gamma, eps):
    """h rounded to x's dtype first; y (and so the backward) from that rounded h: vLLM's style."""
    h = (x.float() + residual.float()).to(x.dtype)
    hf = h.float()
    y = hf * torch.rsqrt(hf.square().mean(-1, keepdim=True) + eps) * gamma.float()
    return y.to(x.dtype), h


def h_not_returned(x, residual, gamma, eps):
    return rounded_h_style(x, residual, gamma, eps)[0]


def h_is_x(x, residual, gamma, eps):
    y, _ = rounded_h_style(x, residual, gamma, eps)
    return y, x * 1


def h_in_fp32(x, residual, gamma, eps):
    y, _ = rounded_h_style(x, residual, gamma, eps)
    return y, x.float() + residual.float()


def rms_of_other_h(x, residual, gamma, eps):
    """1/rms of the fp32 h beside the rounded h: its backward is no gradient at one h."""
    hf = x.float() + residual.float()
    h = hf.to(x.dtype)
    r = torch.rsqrt(hf.square().mean(-1, keepdim=True) + eps)
    return (h.float() * r * gamma.float()).to(x.dtype), h


# --- the op ---------------------------------------------------------------------------------------
def test_the_op_declares_two_outputs_each_with_its_check():
    assert SPEC.output_checks == ("forward", "forward_h")
    assert SPEC.value_checks() == ("forward", "forward_h", "dx", "dresidual", "dgamma")
    assert "forward_h" in SPEC.check_names()
    inputs = SPEC.make_inputs(_case(5, 7, dtype="bfloat16", layout="mixed"), "cpu")
    assert isinstance(inputs.upstream, tuple) and len(inputs.upstream) == 2
    assert all(u.shape == (5, 7) and u.dtype == torch.bfloat16 for u in inputs.upstream)
    assert not torch.equal(inputs.upstream[0], inputs.upstream[1])
    metas = SPEC.forward_metas(inputs)
    assert [(m.shape, m.dtype) for m in metas] == [((5, 7), torch.bfloat16)] * 2
    expected = SPEC.oracle(inputs)
    for name in SPEC.value_checks():
        assert expected[name].dtype == torch.float64 and f"{name}_magnitude" in expected
    x, r = (a.double() for a in inputs.args[:2])
    assert torch.equal(expected["forward_h"], x + r)
    assert torch.equal(expected["dx"], expected["dresidual"])


def test_single_output_ops_keep_their_checks():
    for op in ("softmax", "rmsnorm_offset", "softmax_masked"):
        spec = REGISTRY.op(op)
        assert spec.output_checks == ()
        assert spec.value_checks() == (spec.forward_check, *spec.grad_checks)
        assert isinstance(spec.make_inputs(spec.floor_cases(backend="interpreter")[0], "cpu").upstream, torch.Tensor)


def test_the_project_kernel_passes_floor_cases(device, backend):
    entry = REGISTRY.get(OP, "triton_add_rmsnorm")
    assert failed(entry.fn, spread(), device, backend.name) == {}


def test_a_kernel_of_the_other_style_passes_every_check(device, backend):
    assert failed(rounded_h_style, spread(), device, backend.name) == {}


def test_h_not_returned_fails_the_forward():
    bad = failed(h_not_returned, [_case(7, 33)])
    assert "forward" in bad and "a single tensor, expected a tuple of 2 tensors" in bad["forward"]


def test_a_wrong_h_fails_forward_h():
    bad = failed(h_is_x, [_case(7, 33)])
    assert "forward_h" in bad and "forward" not in bad


def test_h_in_fp32_fails_output_meta():
    bad = failed(h_in_fp32, [_case(7, 33, dtype="bfloat16")])
    assert "output_meta" in bad and "forward_h" in bad["output_meta"]


def test_a_backward_at_two_hs_fails_where_its_terms_cancel():
    """N = 1, tiny values, eps = 1e-12: dx = r u eps / (h^2 + eps), the difference of two terms of
    size r u; an r of the fp32 h next to the rounded h leaves a rounding of h in it."""
    case = Case.of(OP, M=7, N=1, dtype="float16", layout="col_sliced", values="tiny", eps=1e-12, seed=3038)
    bad = failed(rms_of_other_h, [case])
    assert {"dx", "dresidual"} <= set(bad)
    assert failed(rounded_h_style, [case]) == {}


# --- catalog ----------------------------------------------------------------------------------------
# One small case per catalog mutant, chosen to expose its bug class (see each entry's 'why').
KILLING_CASES = {
    "cat.h_not_written": _case(7, 33),
    "cat.h_written_before_add": _case(7, 33),
    "cat.h_fp32": _case(7, 33, dtype="bfloat16"),
    "cat.y_from_x": _case(7, 33),
    "cat.dresidual_missing_dh": _case(7, 33),
    "cat.dx_missing_dh": _case(7, 33),
    "cat.dgamma_from_x": _case(7, 33),
    "cat.block_divisor_forward": _case(7, 33),
    "cat.block_divisor_backward": _case(7, 33),
    "cat.dgamma_mean": _case(7, 33),
    "cat.padding_in_variance": _case(7, 33),
    "cat.residual_assumed_contiguous": _case(7, 33, layout="transposed"),
    "cat.dh_assumed_contiguous": _case(7, 33, layout="transposed"),
    "cat.eps_outside_sqrt": _case(7, 33, values="tiny", eps=0.1),
}


def test_every_patch_in_the_catalog_has_a_killing_case():
    assert sorted(KILLING_CASES) == sorted(e["name"] for e in catalog.CATALOG if "backends" not in e)
    assert [e["name"] for e in catalog.CATALOG if "backends" in e] == ["cat.row_offset_int32"]


@pytest.mark.parametrize("name", sorted(KILLING_CASES))
def test_catalog_mutant_is_killed(name, device, backend):
    assert run_case(SPEC, REGISTRY.get(OP, "triton_add_rmsnorm"), KILLING_CASES[name], backend=backend.name,
                    device=device).passed, "the kernel itself fails the killing case"
    run = run_case(SPEC, REGISTRY.get(OP, name), KILLING_CASES[name], backend=backend.name, device=device)
    assert not run.passed, f"{name} survived {KILLING_CASES[name].id}"


# --- declarations of several outputs ----------------------------------------------------------------
def _decl(**over):
    fields = dict(
        name="two_out", signature="f(x[M, N], w[N]) -> (y[M, N], z[M, N])",
        inputs=(Tensor("x", "M, N"), Tensor("w", "N", values="gain")),
        output={"y": "M, N", "z": "M, N"},
        reference=lambda x, w: (x * w, x + w), value_kinds=("normal",),
    )
    fields.update(over)
    return OpDecl(**fields)


def test_a_declaration_of_several_outputs_names_each_check():
    decl = _decl(output={"y": "M, N", "rowsum": "M"})
    assert decl.output == ("M", "N") and decl.output_shapes == (("M", "N"), ("M",))
    assert decl.output_checks == ("forward", "forward_rowsum")


@pytest.mark.parametrize("over, words", [
    (dict(output={"y": "M, N"}), "a dict names two or more outputs"),
    (dict(output={"y": "M, N", "not a name": "M, N"}), "must be identifiers"),
    (dict(output={"y": "M, N", "x": "M, N"}), "repeat input names"),
    (dict(output={"y": "M, N", "z": "M, K"}), "dimension(s) ['K'] appear in no input's shape"),
    (dict(output={"y": "M, N", "z": "N, M"}, leading="M"), "first in each output's shape"),
    (dict(rounded_terms=3), "rounded_terms must be callable"),
])
def test_bad_declarations_of_several_outputs_are_refused(over, words):
    with pytest.raises(RegistryError) as err:
        _decl(**over)
    assert words in str(err.value)


def test_a_reference_with_the_wrong_number_of_outputs_is_named():
    spec = DeclaredOp(_decl(reference=lambda x, w: x * w))
    inputs = spec.make_inputs(spec.floor_cases(backend="interpreter")[0], "cpu")
    with pytest.raises(ValueError, match="returned 1 output"):
        spec.oracle(inputs)


# bug class: a row with an infinite element (r = 0) made the rounded-h bound of dgamma 0 * inf = NaN
# in every column, and a NaN bound counts as none: the finite rows' rounding lost its allowance and
# a correct kernel failed dgamma at 2.35x (M=4, N=8191, fp16, nonfinite)
def test_a_row_with_an_infinite_element_leaves_the_other_rows_dgamma_bound():
    from oracles.add_rmsnorm import add_rmsnorm_rounded_h

    gen = torch.Generator().manual_seed(0)
    x, res, dy, dh = (torch.randn(4, 33, generator=gen, dtype=torch.float64) for _ in range(4))
    gamma = torch.rand(33, generator=gen, dtype=torch.float64) + 0.5
    finite = add_rmsnorm_rounded_h(x[:2], res[:2], gamma, 1e-5, dy[:2], dh[:2])[4]
    x[2, 5] = float("inf")
    bound = add_rmsnorm_rounded_h(x[:3], res[:3], gamma, 1e-5, dy[:3], dh[:3])[4]
    keep = torch.arange(33) != 5
    assert torch.isfinite(bound[keep]).all()
    assert torch.allclose(bound[keep], finite[keep])  # the infinite row adds exactly 0 there


def test_the_project_kernel_passes_where_a_row_is_infinite(device, backend):
    case = Case.parse("add_rmsnorm:M=4,N=8191,dtype=float16,layout=mixed,values=nonfinite,eps=1e-05,seed=152526")
    run = run_case(SPEC, REGISTRY.get(OP, "triton_add_rmsnorm"), case, backend=backend.name, device=device)
    assert any(r.check == "dgamma" for r in run.records)
    assert run.passed, [(r.check, r.message[:300]) for r in run.records if not r.passed]
