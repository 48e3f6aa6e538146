"""The false-alarm corpus: correct kernels written the way other projects write them pass every
check of a spread of floor cases (every value kind, layout and dtype of the op, the refilled calls
included), and their wrong twins keep failing the check each breaks
(tests/fixtures/false_alarm/correct.py, wrong.py)."""

from __future__ import annotations

import collections

import pytest
import torch

from harness.cases.case import Case
from harness.registry.registry import REGISTRY, KernelEntry
from harness.run.runner import run_case
from vocabulary import RUN_ENDS, Check
from reports import verify_report
from tests.fixtures.false_alarm import correct, wrong

MAX_ELEMENTS = 4096  # interpreter-sized cases
MAX_CASES = 26


def spread(op: str) -> list:
    """Small floor cases of ``op``, smallest first, each kept when it brings a value kind, layout,
    dtype or (value kind, dtype) pair the ones before did not."""
    spec = REGISTRY.op(op)
    cases = sorted(spec.floor_cases(backend="interpreter"), key=lambda c: spec.make_inputs(c, "cpu").args[0].numel())
    seen, chosen = set(), []
    for c in cases:
        if spec.make_inputs(c, "cpu").args[0].numel() > MAX_ELEMENTS:
            continue
        keys = {("values", c["values"]), ("layout", c["layout"]), ("dtype", c["dtype"]), (c["values"], c["dtype"])}
        if keys - seen:
            seen |= keys
            chosen.append(c)
    return chosen[:MAX_CASES]


CASES = {op: spread(op) for op in sorted({k[0] for k in correct.KERNELS + wrong.KERNELS})}


# exp(x - logsumexp(x)) is wrong where x is -1e9 (masked_rows): logsumexp rounds log N away and the
# row sums to N, far beyond any rounding of its terms; its wrong twin keeps that detection
SKIP = {"softmax_exp_minus_lse": ("masked_rows",), "softmax_exp_minus_lse_undeclared": ("masked_rows",),
        "softmax_exp_minus_lse_at_minus_1e9": tuple(k for k in {c["values"] for c in CASES.get("softmax", [])}
                                                    if k != "masked_rows")}


def records(op, name, fn, contract) -> list:
    entry = KernelEntry(op, name, fn, contract, "kernel", "plugin", "tests/fixtures/false_alarm")
    out = []
    for c in CASES[op]:
        if c["values"] in SKIP.get(name, ()):
            continue
        out += run_case(REGISTRY.op(op), entry, c, backend="interpreter", device="cpu").records
    return out


PASSED = collections.defaultdict(set)  # check -> styles that passed it


@pytest.mark.parametrize("op,name,fn,contract,style", correct.KERNELS, ids=[k[1] for k in correct.KERNELS])
def test_correct_kernel_of_another_style_passes_every_check(op, name, fn, contract, style):
    recs = records(op, name, fn, contract)
    failed = [f"{r.check} {r.case_id}: {r.message[:300]}" for r in recs if not r.passed]
    assert not failed, f"{name} ({style}): false alarm(s):\n" + "\n".join(failed[:8])
    checks = {r.check for r in recs}
    spec = REGISTRY.op(op)
    asked = (spec.forward_check,) if contract.forward_only else (spec.forward_check, *spec.grad_checks)
    assert set(asked) <= checks  # every value check its declaration asks for ran
    later = {"no_grad", "fresh_inputs", "changed_input", "repeatable", "inputs_unchanged", "output_meta"}
    if contract.forward_only:  # no backward: nothing to change between a forward and its backward
        later.discard("changed_input")
    assert later <= checks, sorted(later - checks)


def test_every_check_passes_correct_code_of_three_styles():
    """Every check of the runner passes on correct kernels of at least three styles."""
    styles = collections.defaultdict(set)
    for op, name, fn, contract, style in correct.KERNELS:
        if op == "cross_entropy":
            continue  # its kernels run above; the other ops give every check its three styles here
        for r in records(op, name, fn, contract):
            assert r.passed, (name, r.check, r.case_id, r.message[:300])
            styles[r.check].add(style)
    # the runner's checks (vocabulary.names.Check) less how a run ended (RUN_ENDS) and
    # out_of_bounds, which is recorded only when an access leaves its buffer (never as a pass),
    # plus the value checks the three ops share
    checks = [c.value for c in Check if c not in RUN_ENDS and c is not Check.OUT_OF_BOUNDS] + ["forward", "dx"]
    assert {"inputs_unchanged", "output_meta", "contract", "repeatable", "no_grad", "fresh_inputs",
            "changed_input"} <= set(checks)
    for check in checks:
        assert len(styles[check]) >= 3, (check, sorted(styles[check]))


# bug class: p below fp16's smallest normal (6.1e-5) in a backward that starts from y saved in fp16
# (torch's own fp16 softmax does): rounding there is off by half the subnormals' spacing, not by a
# fraction of p; with logits 100 + 10 N(0, 1) such p are common, and a correct kernel failed dx
@pytest.mark.parametrize("name", ["softmax_row_per_program", "softmax_row_tile"])
def test_a_backward_from_y_saved_in_fp16_passes_where_p_is_subnormal(name):
    op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == name)
    case = Case.parse("softmax:M=2,N=7,dtype=float16,layout=offset,values=large_logits,seed=210099")
    p = torch.softmax(REGISTRY.op(op).make_inputs(case, "cpu").args[0].double(), -1)
    assert bool(((p > 0) & (p < torch.finfo(torch.float16).tiny)).any())  # the case holds such p
    entry = KernelEntry(op, name, fn, contract, "kernel", "plugin", "tests/fixtures/false_alarm")
    recs = run_case(REGISTRY.op(op), entry, case, backend="interpreter", device="cpu").records
    assert any(r.check == "dx" for r in recs)
    assert all(r.passed for r in recs), [(r.check, r.message[:300]) for r in recs if not r.passed]


def _changed_input_messages(recs) -> list[str]:
    return [r.message for r in recs if r.check == "changed_input"]


def test_a_view_saved_for_backward_is_a_refusal_not_a_kernel_error():
    """torch refuses the backward of a view whose base changed in place: a safe refusal."""
    op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == "rms_view_saved")
    msgs = _changed_input_messages(records(op, name, fn, contract))
    assert msgs and all("refused" in m or "within tolerance" in m for m in msgs)
    assert any("view" in m.lower() and "refused" in m for m in msgs)  # torch's view message, read as a refusal


@pytest.mark.parametrize("op,name,fn,contract,check", wrong.KERNELS, ids=[k[1] for k in wrong.KERNELS])
def test_wrong_twin_keeps_failing(op, name, fn, contract, check):
    recs = records(op, name, fn, contract)
    failed = {r.check for r in recs if not r.passed}
    assert check in failed, f"{name}: expected a failed {check}, failed: {sorted(failed)}"


def test_undeclared_exp_minus_lse_is_a_precision_failure_and_a_logic_error_is_not():
    """exp(x - lse) in fp32 fails undeclared, as "fail (precision)"; a declared kernel that is
    wrong beyond rounding fails as a plain error."""
    def summary(name):
        op, name, fn, contract, _ = next(k for k in wrong.KERNELS if k[1] == name)
        return verify_report.kernel_summary(op, name, [r.to_dict() for r in records(op, name, fn, contract)])

    lse = summary("softmax_exp_minus_lse_undeclared")
    assert lse["verdict"] == "fail" and lse["failure_class"] == "precision"
    assert verify_report.verdict_label(lse) == "FAIL (precision)"
    wrong_scale = summary("softmax_declared_but_wrong")
    assert wrong_scale["verdict"] == "fail" and wrong_scale["failure_class"] == "error"
    assert verify_report.verdict_label(wrong_scale) == "FAIL"


def test_the_declared_fp32_precision_is_recorded_on_the_records_it_widens():
    op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == "softmax_exp_minus_lse")
    recs = [r for r in records(op, name, fn, contract) if r.check == "forward" and r.dtype == "float32"]
    assert recs and all(r.declared_precision == "Contract(precision=('float32', 64)): + 64 float32 roundings of the terms"
                        for r in recs)
    others = [r for r in records(op, name, fn, contract) if r.check in ("forward", "dx") and r.dtype != "float32"]
    assert others and all(r.declared_precision.startswith("Contract(precision=('float32', 64))") for r in others)
    plain = [r for r in records(op, "softmax_torch", correct.softmax_torch, correct.Contract()) if r.check == "forward"]
    assert plain and all(r.declared_precision is None for r in plain)


def test_the_limit_is_accepted_only_where_an_input_is_infinite():
    """A +inf logit away from the target: the loss's limit (+inf) passes; the same kernel's answer
    must still match the oracle exactly on rows whose inputs are finite (wrong.softmax_limit_leaks)."""
    op = "cross_entropy"
    inf_cases = [c for c in CASES[op] if c["values"] == "nonfinite"]
    assert inf_cases, "the spread holds a non-finite case"
    x = REGISTRY.op(op).make_inputs(inf_cases[0], "cpu").args[0]
    assert bool(torch.isposinf(x).any())


def test_a_gradient_missing_when_asked_alone_is_named_as_such():
    op, name, fn, contract, _ = next(k for k in wrong.KERNELS if k[1] == "rms_dgamma_only_with_dx")
    msgs = [r.message for r in records(op, name, fn, contract) if r.check == "fresh_inputs" and not r.passed]
    assert msgs and all("asked for dgamma alone" in m and "only when another input requires grad" in m for m in msgs)


def test_declared_in_place_writes_and_values_hold_in_every_later_call():
    """A declared write into an input gives the second run fresh inputs of the same values; a
    waived value is waived in the refilled calls too."""
    for wanted in ("rms_dx_into_dy", "cross_entropy_all_ignored_zero_declared"):
        op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == wanted)
        recs = records(op, name, fn, contract)
        assert any(r.waived for r in recs), wanted  # the deviation happened and was waived
        for check in ("repeatable", "no_grad", "fresh_inputs"):
            ran = [r for r in recs if r.check == check]
            assert ran and all(r.passed and not r.waived for r in ran), (wanted, check)


class _OffAtMax(torch.autograd.Function):
    """The textbook softmax's wrong twin: its gradient at each row's max off by 1e-3 of the row's
    sum |dx|, about 160 times the residue of a shift differentiated through."""

    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x.float(), -1)
        ctx.save_for_backward(y, x)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        y, x = ctx.saved_tensors
        dyf = dy.float()
        dx = y * (dyf - (y * dyf).sum(-1, keepdim=True))
        at_max = x == x.amax(-1, keepdim=True)
        return (dx + 1e-3 * at_max * dx.abs().sum(-1, keepdim=True)).to(dy.dtype)


# the floor cases where the residue of the max (softmax) or the lse's max (cross-entropy) exceeded
# the model that left it out (2.61x and 43.6x the allowed error on dx / dlogits at the row's max)
SHIFT_CASES = {
    "softmax": "softmax:M=7,N=1023,dtype=float32,layout=transposed,values=tiny,seed=646217",
    "cross_entropy": "cross_entropy:N=7,V=4093,dtype=float32,layout=contiguous,values=mixed_scale,ignore_index=0,"
                     "ignored=none,seed=740289",
}


@pytest.mark.parametrize("name", ["softmax_textbook", "cross_entropy_lse"])
def test_a_shift_differentiated_through_is_rounding_not_a_logic_error(name):
    """The rounding residue that autograd routes through a shift the result is invariant to (the
    row max) is part of what rounding explains (harness.compare.rounding.shift_residues)."""
    op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == name)
    entry = KernelEntry(op, name, fn, contract, "kernel", "plugin", "tests/fixtures/false_alarm")
    run = run_case(REGISTRY.op(op), entry, Case.parse(SHIFT_CASES[op]), backend="interpreter", device="cpu")
    assert all(r.passed for r in run.records), [r.message[:200] for r in run.records if not r.passed]


def test_a_gradient_off_at_the_max_beyond_the_residue_still_fails():
    entry = KernelEntry("softmax", "off_at_max", _OffAtMax.apply, correct.Contract(), "kernel", "plugin", "here")
    run = run_case(REGISTRY.op("softmax"), entry, Case.parse(SHIFT_CASES["softmax"]), backend="interpreter", device="cpu")
    assert "dx" in {r.check for r in run.records if not r.passed}


def test_exp_minus_lse_on_a_masked_row_fails_as_a_logic_error_that_says_why():
    """The wrong twin of the lse style: where the mask (-1e9 here, the dtype's lowest value in models)
    absorbs log N, exp(x - lse) sums to N; it stays a logic error and the message says why."""
    op, name, fn, contract, _ = next(k for k in wrong.KERNELS if k[1] == "softmax_exp_minus_lse_at_minus_1e9")
    recs = [r for r in records(op, name, fn, contract) if r.check == "forward" and not r.passed]
    assert recs and all("more than rounding explains" in r.message for r in recs)
    assert all("logsumexp formed as max + log(sum exp(x - max)) rounds back to the max" in r.message for r in recs)
    summary = verify_report.kernel_summary(op, name, [r.to_dict() for r in records(op, name, fn, contract)])
    assert summary["failure_class"] == "error"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_why_names_a_row_masked_with_the_dtypes_lowest_value_and_no_ordinary_row(dtype):
    from harness.compare.rounding import absorbed_shift
    x = torch.randn(3, 9, dtype=torch.float64).to(dtype)
    x[1] = torch.finfo(dtype).min
    x[2, :4] = torch.finfo(dtype).min
    said = absorbed_shift(x, [1, 3])
    if dtype == torch.float16:  # -65504: fp32's spacing there is 2^-8, log 9 is not absorbed
        assert said is None
    else:
        assert "rounds back to the max" in said
    assert absorbed_shift(x, [2, 0]) is None  # a partly masked row: its max, and so its lse, is small
    assert absorbed_shift(x, [0, 3]) is None
    assert absorbed_shift(100.0 + 10.0 * torch.randn(2, 9), [0, 0]) is None  # large logits: lse absorbs nothing


LN_CASE = "layer_norm:M=51,N=65,lead=3x17,dtype=bfloat16,layout=seq_sliced,values=zero_rows,eps=1e-06,seed=895939"


def test_a_bf16_dbias_rounded_once_passes_and_one_summed_in_bf16_is_a_precision_choice():
    """dbias as the fp32 sum of dy rounded once to bf16 is the oracle's own rounding: it passes.
    torch's CPU bf16 layer norm keeps partial sums in bf16 (its dbias is not one rounding of the
    fp32 sum): it fails dbias as a precision choice, and passes with that precision declared."""
    import torch.nn.functional as F

    spec, case = REGISTRY.op("layer_norm"), Case.parse(LN_CASE)
    op, name, fn, contract, _ = next(k for k in correct.KERNELS if k[1] == "layer_norm_autograd")
    entry = KernelEntry(op, name, fn, contract, "kernel", "plugin", "tests/fixtures/false_alarm")
    recs = run_case(spec, entry, case, backend="interpreter", device="cpu").records
    assert any(r.check == "dbias" for r in recs) and all(r.passed for r in recs)

    def torch_bf16(x, w, b, eps):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps)

    def dbias(contract):
        entry = KernelEntry(op, "torch_bf16", torch_bf16, contract, "kernel", "plugin", "here")
        return [r for r in run_case(spec, entry, case, backend="interpreter", device="cpu").records if r.check == "dbias"]

    undeclared = dbias(correct.Contract())
    assert len(undeclared) == 1 and not undeclared[0].passed and "a precision choice at most" in undeclared[0].message
    summary = verify_report.kernel_summary(op, "torch_bf16", [r.to_dict() for r in undeclared])
    assert summary["failure_class"] == "precision"
    assert all(r.passed for r in dbias(correct.Contract(precision={"dbias": "input"})))
