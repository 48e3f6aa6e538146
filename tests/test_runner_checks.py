"""harness.run.runner + harness.ops.checks: every check passes a correct kernel and fails a kernel
that breaks exactly that check. Kernels here are plain torch so each test is fast and targeted."""

import pytest
import torch

from harness.compare import rounding

from harness import Contract
from harness.cases.case import Case
from harness.registry.registry import REGISTRY, KernelEntry
from harness.run.runner import run_case
from harness.cases.command import console_words

CLI = " ".join(console_words())  # the console script that starts every repro line

SPEC = REGISTRY.op("rmsnorm")


def case(**over):
    params = dict(M=17, N=257, dtype="float32", layout="contiguous", values="mixed_scale", eps=1e-06, seed=1)
    params.update(over)
    return Case.of("rmsnorm", **params)


def entry(fn, contract=None):
    return KernelEntry("rmsnorm", fn.__name__, fn, contract or Contract(), "kernel", "project", "test")


def run(fn, c=None, contract=None):
    r = run_case(SPEC, entry(fn, contract), c or case(), backend="interpreter", device="cpu")
    return {rec.check: rec for rec in r.records}, r


def good(x, g, eps):
    xf = x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return (xf * r * g.float()).to(x.dtype)


class _WrongGrads(torch.autograd.Function):
    """Forward right; backward with one deliberate mistake chosen by ``bug``."""

    @staticmethod
    def forward(ctx, x, g, eps, bug):
        ctx.save_for_backward(x, g)
        ctx.eps, ctx.bug = eps, bug
        return good(x, g, eps)

    @staticmethod
    def backward(ctx, dy):
        x, g = (t.double() for t in ctx.saved_tensors)
        dy = dy.double()
        r = torch.rsqrt(x.square().mean(-1, keepdim=True) + ctx.eps)
        u = dy * g
        power = 2 if ctx.bug == "r_squared" else 3
        dx = r * u - x * r.pow(power) * (u * x).mean(-1, keepdim=True)
        terms = dy * x * r
        dg = terms.mean(0) if ctx.bug == "dgamma_mean" else terms.sum(0)
        return dx.to(ctx.saved_tensors[0].dtype), dg.to(ctx.saved_tensors[1].dtype), None, None


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "col_sliced", "offset"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_correct_kernel_passes_every_check(dtype, layout):
    checks, r = run(good, case(dtype=dtype, layout=layout))
    assert r.passed, [(c.check, c.message) for c in r.records if not c.passed]
    assert {"forward", "dx", "dgamma", "inputs_unchanged", "output_meta", "repeatable"} <= set(checks)


def test_forward_check_catches_block_divisor():  # bug class: N vs BLOCK
    def block_divisor(x, g, eps):
        xf = x.float()
        r = torch.rsqrt(xf.square().sum(-1, keepdim=True) / 512 + eps)
        return (xf * r * g.float()).to(x.dtype)

    checks, _ = run(block_divisor)
    assert not checks["forward"].passed and checks["forward"].mismatched > 0


def test_dx_check_catches_r_squared():  # bug class: wrong power in the derivative of rsqrt
    checks, _ = run(lambda x, g, eps: _WrongGrads.apply(x, g, eps, "r_squared"))
    assert checks["forward"].passed and not checks["dx"].passed and checks["dgamma"].passed


def test_dgamma_check_catches_mean_instead_of_sum():  # bug class: wrong reduction over rows
    checks, _ = run(lambda x, g, eps: _WrongGrads.apply(x, g, eps, "dgamma_mean"))
    assert checks["dx"].passed and not checks["dgamma"].passed


def test_dgamma_mean_is_invisible_at_one_row():  # why M=1 alone is not enough
    checks, _ = run(lambda x, g, eps: _WrongGrads.apply(x, g, eps, "dgamma_mean"), case(M=1))
    assert checks["dgamma"].passed


def test_inputs_unchanged_catches_in_place_write():  # bug class: kernel scribbles on its input
    def scribbles(x, g, eps):
        y = good(x, g, eps)
        x.detach()[0, 0] = 0.0
        return y

    checks, _ = run(scribbles)
    assert not checks["inputs_unchanged"].passed and "arg0" in checks["inputs_unchanged"].message


def test_inputs_unchanged_catches_write_into_view_padding():  # bug class: wrong stride on store
    def pads(x, g, eps):
        y = good(x, g, eps)
        base = torch.tensor([], dtype=x.dtype).set_(x.untyped_storage())
        base[-1] = 1.0  # the last element of the storage lies past the view
        return y

    checks, _ = run(pads, case(layout="offset"))
    assert not checks["inputs_unchanged"].passed
    assert "outside the view" in checks["inputs_unchanged"].message


def test_output_meta_catches_wrong_dtype():  # bug class: returning the fp32 accumulator
    def fp32_out(x, g, eps):
        return good(x.float(), g.float(), eps)

    checks, _ = run(fp32_out, case(dtype="float16"))
    assert not checks["output_meta"].passed and "dtype torch.float32 != torch.float16" in checks["output_meta"].message


def test_nonfinite_must_propagate():  # bug class: nan_to_num / clamping hides a NaN input
    checks, _ = run(lambda x, g, eps: torch.nan_to_num(good(x, g, eps)), case(values="nonfinite"))
    assert not checks["forward"].passed


def test_contract_rejection_passes_when_kernel_raises_value_error():
    def strict(x, g, eps):
        if x.dtype != torch.float32:
            raise TypeError(f"dtype {x.dtype} unsupported; cast to float32")
        return good(x, g, eps)

    checks, r = run(strict, case(dtype="float16"), Contract(dtypes=(torch.float32,)))
    assert list(checks) == ["contract"] and r.passed


def test_contract_catches_accepted_out_of_contract_input():  # bug class: silent fallback
    checks, _ = run(good, case(dtype="float16"), Contract(dtypes=(torch.float32,)))
    assert not checks["contract"].passed and "accepted out-of-contract input" in checks["contract"].message


def test_contract_catches_wrong_exception_type():  # bug class: crashing instead of rejecting
    def crashes(x, g, eps):
        raise RuntimeError("CUDA error: misaligned address")

    checks, _ = run(crashes, case(layout="transposed"), Contract(contiguous=True))
    assert not checks["contract"].passed and "RuntimeError" in checks["contract"].message


def test_contract_catches_rejection_after_writing_inputs():  # bug class: validates too late
    def late(x, g, eps):
        x.detach().zero_()
        raise ValueError("x must be contiguous")

    checks, _ = run(late, case(layout="transposed"), Contract(contiguous=True))
    assert not checks["contract"].passed and "modified its inputs first" in checks["contract"].message


def test_repeatable_catches_nondeterminism_below_tolerance():  # bug class: races / atomics order
    def noisy(x, g, eps):
        y = good(x, g, eps)
        # one fp32 ulp on a random half of the elements: within the rounding model, never equal twice
        return y * (1 + 2**-23 * torch.randint_like(y, 0, 2))

    checks, _ = run(noisy)
    assert checks["forward"].passed and not checks["repeatable"].passed


def test_repeatable_is_reported_but_allowed_when_contract_says_nondeterministic():
    def noisy(x, g, eps):
        y = good(x, g, eps)
        # one fp32 ulp on a random half of the elements: within the rounding model, never equal twice
        return y * (1 + 2**-23 * torch.randint_like(y, 0, 2))

    checks, _ = run(noisy, contract=Contract(deterministic=False))
    assert checks["repeatable"].passed and "differ" in checks["repeatable"].message


def test_in_contract_exception_fails_forward_with_the_message():
    def raises(x, g, eps):
        raise ValueError("N too large")

    checks, _ = run(raises)
    assert not checks["forward"].passed and "N too large" in checks["forward"].message


def test_non_differentiable_kernel_fails_gradient_checks():
    checks, _ = run(lambda x, g, eps: good(x, g, eps).detach())
    assert not checks["dx"].passed and "not differentiable" in checks["dx"].message


def test_records_carry_the_report_fields():
    checks, _ = run(good)
    rec = checks["forward"].to_dict()
    for field in ("op", "kernel", "check", "case_id", "shape", "dtype", "layout", "max_abs_err", "max_rel_err",
                  "atol", "rtol", "mismatched", "worst_index", "passed", "repro"):
        assert field in rec
    assert rec["shape"] == [[17, 257], [257]]
    assert rec["atol"] == rounding.output_atol(torch.float32) and rec["rtol"] == rounding.output_rtol(torch.float32)
    assert rec["repro"].startswith(f"{CLI} verify --op rmsnorm --select good --case rmsnorm:M=17")


def test_first_record_of_a_case_carries_the_time_per_phase():
    import time as _time

    def slow(x, g, eps):
        _time.sleep(0.05)
        return good(x, g, eps)

    _, r = run(slow)
    timing = r.records[0].timing
    assert set(timing) == {"kernel", "compile", "oracle", "checks"}
    assert timing["kernel"] >= 0.1  # the forward and its repeat each sleep 0.05 s
    assert all(rec.timing is None for rec in r.records[1:])


def test_kernel_summary_adds_up_the_phases():
    from reports.verify_report import kernel_summary

    records = [
        {"case_id": "a", "check": "forward", "passed": True, "timing": {"kernel": 1.0, "oracle": 0.5, "checks": 0.25}},
        {"case_id": "a", "check": "dx", "passed": True},
        {"case_id": "b", "check": "forward", "passed": True, "timing": {"kernel": 2.0, "oracle": 0.5, "checks": 0.25}},
    ]
    s = kernel_summary("rmsnorm", "k", records, seconds=5.0)
    assert s["time_breakdown"] == {"kernel_s": 3.0, "compile_s": 0.0, "oracle_s": 1.0, "checks_s": 0.5, "other_s": 0.5}
    # sharded: the phases are summed over the shards, so "other" is measured against the shards'
    # summed wall time, not the slowest shard's (against the slowest shard's it reads 0.0 s)
    sharded = kernel_summary("rmsnorm", "k", records, seconds=3.0, worker_seconds=6.0)
    assert sharded["time_breakdown"]["other_s"] == 1.5 and sharded["seconds"] == 3.0
