"""The fused variants libraries ship, each a short declaration under properties/ops
(rmsnorm_offset, layer_norm_weight, layer_norm_plain, softmax_masked, cross_entropy_rows):
torch's own fp32 implementation passes a spread of each one's floor cases, and a wrong twin
of the kind such kernels have had fails.

Bug classes: the weight offset dropped (Gemma's 1 + w); the variance with N - 1; the mean of
squares minus the squared mean in fp32 on offset rows; a mask that zeroes entries without
renormalising the row; label smoothing ignored; an ignored row's loss left at its lse."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.runner import run_case
from tests.fixtures import torch_reference_ops as torch_ops

MAX_ELEMENTS = 4096
MAX_CASES = 12


def spread(op: str) -> list:
    """Small floor cases of ``op``, each bringing a value kind, layout, dtype or scalar value the
    ones before did not."""
    spec = REGISTRY.op(op)
    seen, chosen = set(), []
    for c in spec.floor_cases(backend="interpreter"):
        if spec.make_inputs(c, "cpu").args[0].numel() > MAX_ELEMENTS:
            continue
        keys = {(k, str(v)) for k, v in dict(c.params).items() if k not in ("seed",) and not k[0].isupper()}
        if keys - seen:
            seen |= keys
            chosen.append(c)
    return chosen[:MAX_CASES]


def failed_checks(op: str, fn, cases=None) -> set[str]:
    entry = KernelEntry(op, fn.__name__, fn, Contract(), "kernel", "plugin", "tests/test_fused_variants.py")
    bad = set()
    for c in cases if cases is not None else spread(op):
        run = run_case(REGISTRY.op(op), entry, c, backend="interpreter", device="cpu")
        assert run.records
        bad |= {r.check for r in run.records if not r.passed}
    return bad


def _rms(x, w, eps):
    xf = x.float()
    return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w


def offset_dropped(x, gamma, eps, offset):
    return _rms(x, gamma.float(), eps).to(x.dtype)


def unbiased_variance(x, weight, eps):
    xf = x.float()
    mu = xf.mean(-1, keepdim=True)
    var = xf.var(-1, keepdim=True, unbiased=True) if x.shape[-1] > 1 else torch.zeros_like(mu)
    return ((xf - mu) * torch.rsqrt(var + eps) * weight.float()).to(x.dtype)


def one_pass_variance(x, eps):
    xf = x.float()
    mu = xf.mean(-1, keepdim=True)
    var = (xf.square().mean(-1, keepdim=True) - mu.square()).clamp(min=0)
    return ((xf - mu) * torch.rsqrt(var + eps)).to(x.dtype)


def mask_not_renormalised(x, mask, scale):
    return torch.softmax(x.float() * scale, dim=-1).masked_fill(mask != 0, 0.0).to(x.dtype)


def smoothing_ignored(logits, target, ignore_index, label_smoothing):
    return F.cross_entropy(logits.float(), target, ignore_index=ignore_index, reduction="none").to(logits.dtype)


def ignored_rows_not_zero(logits, target, ignore_index, label_smoothing):
    kept = torch.where(target == ignore_index, torch.zeros_like(target), target)
    return F.cross_entropy(logits.float(), kept, label_smoothing=label_smoothing, reduction="none").to(logits.dtype)


VARIANTS = [
    ("rmsnorm_offset", torch_ops.rmsnorm_offset, offset_dropped),
    ("layer_norm_weight", torch_ops.layer_norm_weight, unbiased_variance),
    ("layer_norm_plain", torch_ops.layer_norm_plain, one_pass_variance),
    ("softmax_masked", torch_ops.softmax_masked, mask_not_renormalised),
    ("cross_entropy_rows", torch_ops.cross_entropy_rows, smoothing_ignored),
    ("cross_entropy_rows", torch_ops.cross_entropy_rows, ignored_rows_not_zero),
]


@pytest.mark.parametrize("op, right, wrong", VARIANTS, ids=[w.__name__ for _, _, w in VARIANTS])
def test_torch_passes_and_the_wrong_twin_fails(op, right, wrong):
    cases = spread(op)
    assert len(cases) >= 5
    assert failed_checks(op, right, cases) == set()
    assert failed_checks(op, wrong, cases) & {REGISTRY.op(op).forward_check, "all_ignored"}


def test_the_variants_are_declared_ops_with_their_checks():
    assert REGISTRY.op("rmsnorm_offset").check_names()[:3] == ("forward", "dx", "dgamma")
    assert "dmask" not in REGISTRY.op("softmax_masked").check_names()  # the mask is a constant
    assert REGISTRY.op("layer_norm_plain").grad_checks == ("dx",)
    ids = [c.id for c in REGISTRY.op("cross_entropy_rows").floor_cases(backend="interpreter")]
    assert any("label_smoothing=0.1" in i for i in ids) and any("ignored=all" in i for i in ids)


def rows_of_the_last_leading_dim(x, mask, scale):
    """The wrong twin on leading dims: rows assumed evenly spaced by x's last leading stride."""
    rows = x.as_strided((x.numel() // x.shape[-1], x.shape[-1]), (x.stride(-2), x.stride(-1)))
    return softmax_masked_torch_rows(rows, mask.reshape(-1, mask.shape[-1]), scale).reshape(x.shape)


def softmax_masked_torch_rows(x, mask, scale):
    return torch.softmax(x.float() * scale + mask.float(), dim=-1).to(x.dtype)


@pytest.mark.parametrize("op", ["layer_norm_weight", "layer_norm_plain", "softmax_masked"])
def test_the_row_wise_variants_take_leading_dims_like_their_base_ops(op):
    from harness.ops import leading

    spec = REGISTRY.op(op)
    assert spec.leading == "M"
    cases = [c for c in spec.floor_cases(backend="interpreter") if c.get(leading.LEAD)
             and c["layout"] in ("contiguous", leading.SEQ_SLICED, leading.LEAD_TRANSPOSED)][:4]
    assert len(cases) == 4
    right = dict((o, r) for o, r, _ in VARIANTS)[op]
    assert failed_checks(op, right, cases) == set()
    if op == "softmax_masked":
        assert spec.forward_check in failed_checks(op, rows_of_the_last_leading_dim, cases)


def test_a_row_whose_mass_lies_under_the_most_negative_mask_value_is_judged_by_fp32_rounding():
    """masked_rows puts the kept entries of some rows far below the entries masked with -65504, so
    the row's probability lies on z = scale x - 65504: computing that sum in fp32 rounds it by up
    to 2^-9 (an ulp at 65504), a relative error of 0.4% in p. torch's own fp32 softmax makes it;
    the error model counts the sum's rounding where the mask is not 0 (it is exact where it is)."""
    from harness.cases.case import Case

    case = Case.of("softmax_masked", M=8191, N=7, dtype="float16", layout="mixed", values="masked_rows", scale=3.0,
                   seed=10971)
    x, mask, _ = REGISTRY.op("softmax_masked").make_inputs(case, "cpu").args
    assert (mask[5928] == -65504).sum() == 3 and float(x[5928].min()) == -30000.0  # the row of the false alarm
    assert failed_checks("softmax_masked", torch_ops.softmax_masked, [case]) == set()
    assert "forward" in failed_checks("softmax_masked", mask_not_renormalised, [case])
